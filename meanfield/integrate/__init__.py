"""The integration engine shared by every solver of the project.

.. autosummary::
   integrate
   RungeKutta
   EulerMaruyama
   ButcherTableau
   ContinuousExtension
   PIController
   ConstantStep
   StopReason
   Solution
   finish
   StepSizeMonitor

One loop (:func:`integrate`), one tableau registry (:data:`SCHEMES`), controllers whose
``adapt`` is pure, monitors that may stop or restart a run, trackers with interrupt
schedules, and one result schema (:data:`RESULT_ATTRS`). ``meanfield.solve`` (a density on a
spectral domain), ``meanfield.solve_lagrangian`` (characteristics), ``meanfield.solve_gaussian``
(the mean and covariance ODEs), ``particles.simulate`` (tokens) and the studies of
``validation`` all run on it.
"""

from __future__ import annotations

from meanfield.integrate.controllers import ConstantStep, ErrorPair, PIController, rms_norm
from meanfield.integrate.driver import (
    IntegrationError,
    Interrupted,
    Monitor,
    Replace,
    Solution,
    Stop,
    StopReason,
    integrate,
)
from meanfield.integrate.finish import finish, mark_unsuccessful, run_attrs
from meanfield.integrate.schema import (
    RESULT_ATTRS,
    check_result_attrs,
    result_attrs,
    revise_attrs,
    setting_of,
    settings_of,
)
from meanfield.integrate.stability import (
    STABILITY_RADIUS,
    StepSizeMonitor,
    check_step_count,
    stability_radius,
)
from meanfield.integrate.steppers import EulerMaruyama, RungeKutta
from meanfield.integrate.tableaus import (
    BOSH3,
    DOP853,
    DOPRI5,
    EULER,
    RK4,
    SCHEMES,
    ButcherTableau,
    ContinuousExtension,
    get_scheme,
    register_scheme,
)
from meanfield.integrate.trackers import (
    FinishedSimulation,
    Interrupts,
    ProgressTracker,
    Tracker,
    TrackerBase,
)

__all__ = [
    "BOSH3", "DOP853", "DOPRI5", "EULER", "RESULT_ATTRS", "RK4", "SCHEMES", "ButcherTableau", "ConstantStep",
    "ContinuousExtension",
    "ErrorPair", "EulerMaruyama", "FinishedSimulation", "STABILITY_RADIUS", "StepSizeMonitor",
    "IntegrationError", "Interrupted", "Interrupts", "Monitor", "PIController",
    "ProgressTracker", "Replace", "RungeKutta", "Solution", "Stop",
    "StopReason", "Tracker", "TrackerBase", "get_scheme", "integrate", "register_scheme",
    "check_result_attrs", "check_step_count", "finish", "mark_unsuccessful", "result_attrs",
    "revise_attrs", "rms_norm", "run_attrs", "setting_of", "settings_of",
    "stability_radius",
]
