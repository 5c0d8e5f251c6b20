"""Human approval: proposals that wait for a person, bound to exactly the action approved."""
