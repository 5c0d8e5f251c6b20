"""Backends under stress: bulkheads, circuit breakers and retry budgets per backend
(``guard``), and load shedding and draining of the process (``shedding``)."""
