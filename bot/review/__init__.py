"""The review flow: plan the changed kernels, check them out, walk each through the gates, merge the parts."""
