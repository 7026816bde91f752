"""Pure decisions: the gate, its statistics and metrics, occupancy, launch figures, flag and tunable checks, /accept."""
