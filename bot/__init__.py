"""opgate: decides whether a change to a GPU kernel may land."""

__version__ = "0.2.0"
# Where the reusable workflows live (`opgate init` writes callers of OWNER/REPO/.github/workflows/opgate-*.yml);
# the repository this release is published from.
UPSTREAM = "OWNER/opgate"
