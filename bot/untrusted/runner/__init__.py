"""The case runner: launch (review side), judge (the trusted process), worker + protocol (inside the sandbox)."""
