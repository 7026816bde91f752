"""Everything that compiles or runs pull-request code: the sandbox, builds, ptxas, Nsight and the case runner."""
