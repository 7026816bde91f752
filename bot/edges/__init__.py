"""The outside world, thin: GitHub (API, events, publishing), git, and what machine this is."""
