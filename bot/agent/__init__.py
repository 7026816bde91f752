"""The agent edge: prompt, gateway client and the validated review it returns."""
