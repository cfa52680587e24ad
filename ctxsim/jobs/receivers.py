"""What the job system follows: the end of every task (its ticket is given back)."""
