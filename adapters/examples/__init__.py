"""Example backends a reader can run beside ``make run`` (see README, "Registering a tool")."""
