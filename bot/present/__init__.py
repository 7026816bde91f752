"""Pure rendering of what a review found: the PR comment, the digest, replies, the terminal progress."""
