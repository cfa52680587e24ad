"""The parts of `ctxsim-push` (contrib/claude-code/bin/ctxsim-push): standard library only."""
