"""opgate: decides whether a change to a GPU kernel may land."""

__version__ = "0.1.0"
