"""`opgate tune`: the agent (or a search) iterates against the judge within a token budget."""
