"""What no other tool shows (issue 10): prompt-cache hits and cost, information lost, sweeps.

Pure Python over the engine (`ctxsim.pipeline`): no Django. The web app `ctxsim.analysis`
renders these results.
"""
