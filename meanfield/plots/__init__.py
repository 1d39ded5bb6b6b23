"""Every figure of the core (matplotlib, Agg).

.. autosummary::
   figures
   density
   sphere
   convergence
   dataset
   gaussian
   lagrangian

``figures`` holds the shared figure helpers (a new figure, axes of angles, writing a PNG);
each other module draws one kind of result file. ``meanfield plot`` chooses among them by
the file's dimensions and attrs.
"""
