"""Replay requests, approvals, dispatches (the replay-approvals issue builds them)."""
