"""`make bench`: SPEC §9's quality targets, each measured against its baseline in the same run."""
