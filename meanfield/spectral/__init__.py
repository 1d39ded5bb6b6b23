"""The spectral solver: the continuity equation on a domain's basis (docs/equations.md section 2).

.. autosummary::
   flow
   solve
   resolution
   convergence
   initial

``flow`` is the right-hand side ``-div(rho X[rho])`` (plus noise) on a
:class:`meanfield.domains.Domain`; ``solve`` integrates it with the engine
(:mod:`meanfield.integrate`) and refines the resolution when the band limit is reached
(``resolution``); ``convergence`` runs self-convergence studies; ``initial`` holds the built-in
initial densities. The domains themselves (:mod:`meanfield.domains`) are shared with the
Lagrangian solver, the metrics and the file I/O, and live beside this package.
"""
