"""Tools: how they become runnable, how a registration is checked, how processes stay in sync.

* :mod:`broker.tools.runtime`: each tool bound to its adapter, verifiers, limits and secrets
  (the :class:`~broker.tools.runtime.Registry` the hot path reads);
* :mod:`broker.tools.registration`: a ``POST /v1/tools`` body, checked whole;
* :mod:`broker.tools.sync`: registered tools written to the store and mirrored into every
  process's registry.
"""
