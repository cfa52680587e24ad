"""Team review of sessions (SPEC §8): comments, review status, activity."""
