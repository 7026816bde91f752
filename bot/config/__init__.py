"""What the user configured, parsed once: the repository's [tool.opgate], kernel manifests, settings, secrets."""
