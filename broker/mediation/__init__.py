"""Tool mediation (issue 22): what each route's model is offered, and a receipt of it."""
