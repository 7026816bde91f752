"""Text that leaves opgate: untrusted text made safe for logs and comments, secrets masked."""
