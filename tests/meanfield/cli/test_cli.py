"""The ``meanfield`` command line: assembly from entry points, the options table, errors.

``solve`` and ``plot`` run end to end in-process; the other commands' runs are tested with
their packages (tests/particles/test_cli.py, tests/validation/test_cli.py).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import EntryPoint

import numpy as np
import pytest
from testkit import interrupt_command

import meanfield.cli as cli
from meanfield.cli import build_parser, command_entry_points, main, options
from meanfield.io import read_netcdf

CORE = ("convergence", "gaussian", "plot", "solve")
ALL = (*CORE, "metastability", "particles", "phase-diagram", "tokens", "validate")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


# -- assembly ---------------------------------------------------------------------------------


def test_every_command_is_registered() -> None:
    # the installed entry points (pyproject.toml) give exactly these commands
    assert set(ALL) <= {ep.name for ep in command_entry_points()}
    assert set(ALL) <= set(_subparsers(build_parser()))


def test_core_cli_does_not_import_its_users() -> None:
    # in a fresh process: importing the core's CLI modules loads neither particles nor validation
    mods = ", ".join(f"meanfield.cli.{m}" for m in ("options", "solve", "plot", "gaussian",
                                                     "convergence"))
    code = (f"import sys, meanfield.cli, {mods}; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('particles', 'validation')); "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_broken_command_is_named_not_dropped(monkeypatch, capsys) -> None:
    bad = EntryPoint(name="broken", value="meanfield_no_such_module_xyz", group=cli.GROUP)
    real = command_entry_points()
    monkeypatch.setattr(cli, "entry_points", lambda group: [*real, bad])
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "broken" in out and "BROKEN" in out and "meanfield_no_such_module_xyz" in out
    assert main(["broken", "--whatever"]) == 1
    err = capsys.readouterr().err
    assert "meanfield_no_such_module_xyz" in err and "ModuleNotFoundError" in err
    assert main(["plot", "/nonexistent.nc"]) == 2  # the other commands still work


def test_command_whose_add_parser_fails_is_reported(monkeypatch, capsys) -> None:
    # a module that imports but fails while registering: still one named, broken command
    bad = EntryPoint(name="half", value="meanfield.cli.options", group=cli.GROUP)  # no add_parser(sub)
    monkeypatch.setattr(cli, "entry_points", lambda group: [bad])
    assert main(["half"]) == 1
    assert "meanfield.cli.options" in capsys.readouterr().err


def test_no_commands_registered_says_how_to_fix(monkeypatch, capsys) -> None:
    monkeypatch.setattr(cli, "entry_points", lambda group: [])
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "pip install" in capsys.readouterr().out


# -- the options table ------------------------------------------------------------------------


@pytest.mark.parametrize("command", ALL)
def test_help_shows_every_default(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    parser = _subparsers(build_parser())[command]
    for action in parser._actions:
        if action.help in (None, argparse.SUPPRESS) or not action.option_strings:
            continue
        if action.dest == "help":
            continue
        assert "(default: " in action.help or "(required)" in action.help, action.option_strings
        assert action.option_strings[0] in text
    # the old spellings are accepted but not listed
    for alias in ("--t-end", "--num", "--N", "--seeds", "--initial"):
        assert alias + " " not in text


@pytest.mark.parametrize("command", ALL)
def test_every_default_passes_its_check(command: str) -> None:
    for name in options.command_table(command):  # another package's: registered on import
        opt = options.option_for(command, name)
        if not (opt.required or opt.flag_only or opt.switch):
            assert opt.validate(opt.default) is opt.default, (command, name)


def test_option_table_is_self_consistent() -> None:
    build_parser()  # every command registered, the other packages' with their own options
    flags = [o.flag for o in options.OPTIONS.values()]
    aliases = [a for o in options.OPTIONS.values() for a in o.aliases]
    assert len(set(flags)) == len(flags)  # one option per flag
    for command, names in options.COMMANDS.items():
        assert set(names) <= set(options.OPTIONS), command
        taken = [options.OPTIONS[n].flag for n in names]
        hidden = [a for n in names for a in options.OPTIONS[n].aliases]
        assert not set(hidden) & set(taken), command  # an alias never shadows a real flag
    assert set(aliases) >= {"--t-end", "--num", "--N", "--seeds", "--initial"}


@pytest.mark.parametrize(
    ("command", "old", "new", "text", "value"),
    [
        ("solve", "--N", "--resolution", "64", 64),
        ("convergence", "--t-end", "--t-max", "0.5", 0.5),
        ("convergence", "--num", "--times", "7", 7),
        ("convergence", "--initial", "--init", "wrapped-cauchy", "wrapped-cauchy"),
        ("gaussian", "--t-end", "--t-max", "2", 2.0),
        ("gaussian", "--num", "--times", "11", 11),
        ("metastability", "--seeds", "--realizations", "8", 8),
        ("metastability", "--N", "--resolution", "64", 64),
        ("plot", "--times", "--at", "0.5", [0.5]),
    ],
)
def test_old_spellings_still_work(command, old, new, text, value, capsys) -> None:
    parser = build_parser()
    positional = {"solve": ["circle"], "plot": ["f.nc"]}.get(command, [])
    a = parser.parse_args([command, *positional, old, text])
    b = parser.parse_args([command, *positional, new, text])
    dest = options.COMMANDS[command] and next(
        n for n in options.COMMANDS[command] if options.OPTIONS[n].flag == new)
    assert getattr(a, dest) == getattr(b, dest) == value
    err = capsys.readouterr().err
    assert f"{old} is now spelled {new}" in err


@pytest.mark.parametrize(
    ("command", "solver"),
    [("convergence", "spectral"), ("gaussian", "gaussian"),
     ("particles", "particles"), ("phase-diagram", "phase_diagram"),
     ("metastability", "ensemble")],
)
def test_attention_choices_come_from_the_registry(command: str, solver: str) -> None:
    from meanfield import attention

    assert options.option_for(command, "attention").choices == attention.names(solver)


def test_solve_offers_the_kinds_of_both_its_solvers() -> None:
    """``meanfield solve`` runs the spectral solver or (``solve lagrangian``) the
    characteristics solver: it offers the kinds of either, and the solver refuses the rest."""
    from meanfield import attention

    choices = set(options.option_for("solve", "attention").choices)
    assert choices == set(attention.names("spectral")) | set(attention.names("lagrangian"))


def test_attention_aliases_and_case(capsys) -> None:
    parser = build_parser()
    assert parser.parse_args(["solve", "circle", "--attention", "USA"]).attention == "unnormalized"
    assert parser.parse_args(["particles", "--attention", "SoftMax"]).attention == "softmax"
    assert main(["solve", "circle", "--attention", "l2"]) == 2
    err = capsys.readouterr().err
    assert "attention='l2' is not supported by 'spectral'" in err
    assert "'spectral' supports ('softmax', 'unnormalized')" in err
    assert main(["particles", "--attention", "nonsense"]) == 2
    assert "--attention must be one of" in capsys.readouterr().err


def test_old_initial_value_spelling() -> None:
    args = build_parser().parse_args(["solve", "circle", "--init", "vonmises"])
    assert args.init == "von-mises"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["solve", "circle", "--t-max", "0"], "--t-max must be finite and > 0, got 0.0"),
        (["solve", "circle", "--t-max", "inf"], "--t-max must be finite and > 0"),
        (["convergence", "--t-end", "-1"], "--t-end must be finite and > 0, got -1.0"),
        (["solve", "circle", "--times", "1"], "--times must be >= 2, got 1"),
        (["convergence", "--num", "1"], "--num must be >= 2, got 1"),
        (["particles", "--seed", "-1"], "--seed must be >= 0, got -1"),
        (["validate", "--workers", "0"], "--workers must be >= 1, got 0"),
        (["solve", "circle", "--N", "0"], "--N must be >= 1, got 0"),
        (["solve", "circle", "--beta", "-1"], "--beta must be finite and >= 0, got -1.0"),
        (["metastability", "--beta", "4", "nan", "--out", "x.nc"], "--beta must be finite"),
        (["phase-diagram", "--delta", "2", "--out", "x.nc"], "--delta must lie in (0, 1), got 2.0"),
        (["gaussian", "--mean", "[0]", "--cov", "[[1]]"], "--t-max is required"),
    ],
)
def test_bad_value_names_the_typed_option(argv, message, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # refused before anything was computed or written


def test_validate_raises_value_error_naming_the_option() -> None:
    with pytest.raises(ValueError, match=r"--t-max must be finite and > 0, got 0"):
        options.OPTIONS["t_max"].validate(0.0)
    with pytest.raises(ValueError, match=r"--t-end must be"):
        options.OPTIONS["t_max"].validate(-1.0, "--t-end")
    with pytest.raises(ValueError, match=r"--value must be one of 1, -1, got 2"):
        options.OPTIONS["value"].validate(2)


def test_integer_options_refuse_fractions(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["validate", "--workers", "1.5"])
    assert exc.value.code == 2
    assert "--workers" in capsys.readouterr().err


# -- errors a user can read -------------------------------------------------------------------


def test_missing_input_file_is_one_line(capsys) -> None:
    assert main(["plot", "/nonexistent/file.nc"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "/nonexistent/file.nc" in err


def test_debug_shows_the_traceback_and_keeps_the_exit_code(capsys) -> None:
    # the same codes as without --debug (2 bad input, 130 interrupted), the traceback before
    # the one-line error
    assert main(["--debug", "solve", "zonal", "--times", "1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith("meanfield solve: error: --times must be >= 2, got 1\n")
    assert main(["plot", "/nonexistent/other.nc", "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError: no such file" in err


def test_interrupt_is_one_line_and_130(monkeypatch, capsys) -> None:
    def interrupted(args):  # what Ctrl-C inside a solve looks like to main()
        raise KeyboardInterrupt

    monkeypatch.setattr("meanfield.cli.solve.run", interrupted)
    assert main(["solve", "circle"]) == 130
    err = capsys.readouterr().err
    assert err == "meanfield solve: error: interrupted\n"
    assert main(["solve", "sphere", "--debug"]) == 130
    err = capsys.readouterr().err
    assert "Traceback" in err and "KeyboardInterrupt" in err
    assert err.endswith("meanfield solve: error: interrupted\n")


def test_debug_exit_code_in_a_real_process(tmp_path) -> None:
    # the reproduction exited 1 with --debug (the traceback of an uncaught error), 2 without
    code = "import sys; from meanfield.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = ["particles", "--n", "0", "--out", str(tmp_path / "p.nc")]
    for extra in ([], ["--debug"]):
        proc = subprocess.run([sys.executable, "-c", code, *argv, *extra], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.endswith("meanfield particles: error: --n must be >= 1, got 0\n")
        assert ("Traceback" in proc.stderr) == bool(extra)


def test_unreadable_output_is_one_line(tmp_path, capsys) -> None:
    # --out under a plain file: the OS refuses, the CLI says so in one line
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["gaussian", "--mean", "[0]", "--cov", "[[1]]", "--t-max", "0.1",
                 "--times", "2", "--out", str(blocker / "g.nc")])
    assert code in (1, 2)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "file" in err


# -- solve and plot end to end ----------------------------------------------------------------


def test_solve_circle_writes_netcdf_and_plot(tmp_path, capsys) -> None:
    out = tmp_path / "sol.nc"
    png = tmp_path / "sol.png"
    code = main(["solve", "circle", "--beta", "2", "--resolution", "32", "--t-max", "1",
                 "--times", "5", "--out", str(out), "--plot", str(png), "--no-progress"])
    assert code == 0
    ds = read_netcdf(out)
    assert ds.density.shape[0] == 5 and int(ds.attrs["successful"]) == 1
    np.testing.assert_allclose(ds.mass, 1.0, atol=1e-12)  # mass is conserved to round-off
    assert png.stat().st_size > 10_000  # a real figure, not an empty file
    png2 = tmp_path / "again.png"
    assert main(["plot", str(out), "--out", str(png2)]) == 0
    assert png2.exists()
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize(("d", "asked", "chosen"), [(2, "fast", "fast"), (3, "direct", "direct"),
                                                   (2, "auto", "direct")])
def test_solve_lagrangian_passes_the_field_method_on(d, asked, chosen, tmp_path, capsys) -> None:
    """``--field-method`` reaches ``solve_lagrangian``; the choice made is in the file's
    settings (``auto`` at 16 nodes is below every crossover: direct)."""
    import json

    out = tmp_path / "lag.nc"
    assert main(["solve", "lagrangian", "--d", str(d), "--resolution", "16" if d == 2 else "8",
                 "--t-max", "0.1", "--times", "2", "--field-method", asked, "--no-progress",
                 "--out", str(out)]) == 0, capsys.readouterr().err
    assert json.loads(read_netcdf(out).attrs["settings"])["field_method"] == chosen


def test_field_method_is_refused_by_the_spectral_solvers(tmp_path, capsys) -> None:
    """The spectral solvers sum no particles: a ``--field-method`` given to them is an error
    naming the option, before any work."""
    out = tmp_path / "sol.nc"
    assert main(["solve", "circle", "--field-method", "direct", "--out", str(out)]) == 2
    assert "--field-method direct applies to 'meanfield solve lagrangian' only" in capsys.readouterr().err
    assert not out.exists()


def test_gaussian_file_is_drawn_by_plot(tmp_path) -> None:
    out = tmp_path / "g.nc"
    assert main(["gaussian", "--mean", "[1,0]", "--cov", "[[1,0],[0,1]]", "--t-max", "0.2",
                 "--times", "3", "--out", str(out)]) == 0
    assert main(["plot", str(out)]) == 0
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_refuses_a_file_it_cannot_draw(tmp_path, capsys) -> None:
    import xarray as xr

    path = tmp_path / "other.nc"
    xr.Dataset({"y": ("k", np.arange(3.0))}).to_netcdf(path, engine="h5netcdf")
    assert main(["plot", str(path)]) == 2
    assert "cannot draw" in capsys.readouterr().err


def test_plot_reads_netcdf3_and_refuses_non_netcdf_in_one_line(tmp_path, capsys) -> None:
    import xarray as xr

    text, folder, n3 = tmp_path / "notes.nc", tmp_path / "dir.nc", tmp_path / "n3.nc"
    text.write_text("not a NetCDF file")
    folder.mkdir()
    for path, message in ((text, "cannot read"), (folder, "is a folder")):
        assert main(["plot", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err and str(path) in err
    xr.Dataset({"y": ("k", np.arange(3.0))}).to_netcdf(n3, engine="scipy")  # NetCDF-3
    assert main(["plot", str(n3)]) == 2
    assert "cannot draw" in capsys.readouterr().err  # read through the fallback engine


def test_cli_reports_bad_input(capsys) -> None:
    assert main(["solve", "circle", "--beta", "-1", "--no-progress"]) == 2
    assert "beta" in capsys.readouterr().err


def test_cli_help_lists_subcommands(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for name in ALL:
        assert name in text


# -- issue 21: flags passed on, one wording per option ----------------------------------------


@pytest.mark.parametrize("domain", ["sphere", "zonal"])
def test_solve_overwrite_is_passed_on(domain, tmp_path, capsys) -> None:
    # the reproduction: `meanfield solve DOMAIN --out run.nc --overwrite` refused the file
    out = tmp_path / "again.nc"
    argv = ["solve", domain, "--resolution", "8", "--d", "4", "--t-max", "0.05", "--times", "2",
            "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    first = out.stat().st_mtime_ns
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--out: {out} exists; pass --overwrite to replace it" in err
    assert "overwrite=True" not in err
    assert main([*argv, "--overwrite"]) == 0
    assert out.stat().st_mtime_ns >= first and int(read_netcdf(out).attrs["successful"]) == 1


@pytest.mark.parametrize(("command", "extra"), [("phase-diagram", []), ("metastability", [])])
@pytest.mark.parametrize("n", ["0", "1", "-3"])
def test_every_too_small_n_is_refused_in_one_wording(command, extra, n, tmp_path, capsys) -> None:
    assert main([command, "--n", n, "--out", str(tmp_path / "x.nc"), *extra]) == 2
    err = capsys.readouterr().err
    assert err == (f"meanfield {command}: error: --n must be >= 2 (clusters are pairs of "
                   f"tokens), got {n}\n")


def test_plot_at_errors_name_the_option(tmp_path, capsys) -> None:
    out = tmp_path / "c.nc"
    assert main(["solve", "circle", "--resolution", "16", "--t-max", "0.3", "--times", "3",
                 "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    for at in ("0.7", "-0.1", "nan"):
        assert main(["plot", str(out), "--at", at, "--out", str(tmp_path / "c.png")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"meanfield plot: error: --at {float(at):g} is outside the saved "
                              "times [0, 0.3]"), err
        assert "times:" not in err and not (tmp_path / "c.png").exists()
    # the old spelling is the one named
    assert main(["plot", str(out), "--times", "2", "--out", str(tmp_path / "c.png")]) == 2
    assert "error: --times 2 is outside the saved times" in capsys.readouterr().err


@pytest.mark.parametrize("command", ALL)
def test_attention_help_names_only_kinds_offered(command, capsys) -> None:
    parser = _subparsers(build_parser())[command]
    for action in parser._actions:
        if action.dest != "attention":
            continue
        for kind in ("softmax", "unnormalized"):
            if f"{kind} =" in action.help:
                assert kind in action.option.choices, (command, action.help)
    # gaussian offers no unnormalized kind: its help said "unnormalized = USA"
    gaussian = _subparsers(build_parser())["gaussian"]
    (att,) = [a for a in gaussian._actions if a.dest == "attention"]
    assert "unnormalized" not in att.option.choices and "USA" not in att.help


def test_gaussian_writes_the_partial_result_when_the_integrator_gives_up(tmp_path, monkeypatch,
                                                                         capsys) -> None:
    # not only on blow-up: any GaussianFlowError with a partial result is written, exit 1
    import meanfield.gaussian as g

    real = g.solve_gaussian

    def gives_up(model, mean, cov, times, **kw):
        partial = real(model, mean, cov, times[:2], **kw)
        partial.attrs.update(successful=0, stop_reason="the integrator stopped (test)")
        raise g.GaussianFlowError("the integrator stopped (test)", time=float(times[1]),
                                  mean=mean, cov=cov, partial=partial)

    monkeypatch.setattr(g, "solve_gaussian", gives_up)
    out = tmp_path / "g.nc"
    assert main(["gaussian", "--mean", "[0,1]", "--cov", "[[2,0],[0,1]]", "--t-max", "0.3",
                 "--times", "4", "--out", str(out)]) == 1
    assert "the integrator stopped (test)" in capsys.readouterr().err
    ds = read_netcdf(out)
    assert ds.sizes["time"] == 2 and int(ds.attrs["successful"]) == 0


def test_an_unresolved_start_is_said_with_the_options(tmp_path, capsys) -> None:
    # the library's words (rho0, tail_tol) are not the command's: --init and --resolution
    out = tmp_path / "z.nc"
    assert main(["solve", "zonal", "--d", "5", "--resolution", "5", "--t-max", "0.1",
                 "--times", "2", "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--init modes is not resolved at --resolution 5" in err and "raise --resolution" in err
    assert "rho0" not in err and "tail_tol" not in err and not out.exists()



def test_interrupted_convergence_writes_the_runs_finished(tmp_path) -> None:
    """Ctrl-C (real SIGINT) during the study: exit 130, the message names the file and the
    runs not done, and the file holds the runs finished (finite) and those not run (NaN),
    successful = 0. The noise keeps every level resolved to t = 10; 800 tolerances keep the
    child busy far past the SIGINT, which lands 8 s after the imports, when at least the
    first resolution (about a second) has run. (Measured on an idle 2-core machine: 80
    tolerances took 6.5 s after the imports, so the study could end before the SIGINT; 800
    take about 65 s, and the child is interrupted at 8 s whatever the load.)"""
    out = tmp_path / "study.nc"
    tols = ",".join(f"{x:.6g}" for x in np.logspace(-6, -13, 800))
    code, err = interrupt_command(["convergence", "--levels", "2", "--noise", "0.5", "--t-max", "10",
                            "--times", "3", "--tolerances", tols, "--out", str(out)],
                           b"started", after_s=8.0)
    assert code == 130, err
    assert "self_convergence interrupted while running" in err and "not run" in err
    assert f"partial results written to {out}" in err
    ds = read_netcdf(out)
    assert int(ds.attrs["successful"]) == 0 and "not run: " in ds.attrs["stop_reason"]
    t_res = ds["t_resolved"].values
    t_tol = ds["t_resolved_tolerance"].values
    assert t_res[0] == 10.0  # the first level ran, to the end
    ran = np.concatenate([t_res, t_tol])
    done = int(np.sum(np.isfinite(ran)))
    assert 0 < done < ran.size and np.all(np.isfinite(ran[:done])) and np.all(np.isnan(ran[done:]))
    if np.isnan(t_tol[-1]):  # the tightest tolerance did not run: no error is claimed to it
        assert np.all(np.isnan(ds["error_tolerance"].values))


def test_interrupted_gaussian_writes_the_steps_accepted(tmp_path) -> None:
    """Ctrl-C (real SIGINT) inside scipy's solve_ivp: exit 130, and --out holds the output
    times passed up to the last accepted step (it used to hold the initial state only), with
    the exact rotation m(t) = (cos 2t, sin 2t) of this model (V a rotation, Q = K = I,
    beta = 1: m' = (1 + beta) V m, Sigma = I fixed)."""
    out = tmp_path / "g.nc"
    code, err = interrupt_command(["gaussian", "--mean", "[1,0]", "--cov", "[[1,0],[0,1]]", "--V",
                            "[[0,-1],[1,0]]", "--t-max", "1e6", "--times", "100001", "--rtol",
                            "1e-12", "--out", str(out)], b"started", after_s=3.0)
    assert code == 130, err
    assert err.count("meanfield gaussian") == 1 and f"partial results written to {out}" in err
    ds = read_netcdf(out)
    assert int(ds.attrs["successful"]) == 0 and "interrupted" in ds.attrs["stop_reason"]
    t = ds["time"].values
    assert t.size >= 2 and t[-1] <= ds.attrs["t_reached"] < 1e6
    # DOP853 at rtol 1e-12: a local error ~1e-12 per step, at most ~1e5 steps in 3 s: < 1e-6
    expected = np.stack([np.cos(2 * t), np.sin(2 * t)], axis=-1)
    np.testing.assert_allclose(ds["mean"].values, expected, atol=1e-6)
    np.testing.assert_allclose(ds["cov"].values, np.broadcast_to(np.eye(2), (t.size, 2, 2)),
                               atol=1e-6)



def test_gaussian_blow_up_is_said_with_one_prefix(tmp_path, capsys) -> None:
    """Softmax, Q = K = V = I, beta = 1, Sigma0 = I: Sigma' = 2 Sigma^2 blows up at t* = 1/2
    (docs/gaussian.md). Exit 1, the partial result written, and the message has one prefix
    (it read 'meanfield gaussian: solve_gaussian: ...')."""
    out = tmp_path / "g.nc"
    assert main(["gaussian", "--mean", "[0,0]", "--cov", "[[1,0],[0,1]]", "--t-max", "1",
                 "--times", "11", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("meanfield gaussian: finite-time blow-up") and "t* = 0.5" in err
    assert err.count("meanfield gaussian") == 1 and "solve_gaussian" not in err
    ds = read_netcdf(out)
    assert int(ds.attrs["successful"]) == 0 and float(ds["time"][-1]) <= 0.5


def test_domain_choices_and_modes_come_from_the_domains() -> None:
    """``--domain`` offers the registered domains that define ``from_options`` (in the order
    they registered); ``--init modes`` adds the domain's ``low_modes`` and is refused, naming
    the domain, where it names none."""
    from meanfield.cli.solve import _initial
    from meanfield.domains import Circle, ZonalSphere, command_line_domains

    assert command_line_domains()[:3] == ("circle", "sphere", "zonal")
    assert options.option_for("convergence", "domain").choices == command_line_domains()
    rho = _initial(ZonalSphere(5, 12), "modes")
    expected = ZonalSphere(5, 12).uniform() + 0.01 * sum(
        ZonalSphere(5, 12).real_mode(k) for k in (1, 2, 3, 4))
    # check_density renormalises by int rho dA = 1 up to the grid sum's round-off (13 nodes)
    np.testing.assert_allclose(rho, expected, rtol=1e-13, atol=0)

    class NoModes(Circle):  # no ``name``: not registered
        low_modes = ()

    with pytest.raises(ValueError, match="--init modes: the domain 'circle' names no low modes"):
        _initial(NoModes(8), "modes")


def test_keep_writes_the_partial_result_unless_the_raiser_handled_the_file(tmp_path) -> None:
    """``meanfield.cli._keep`` writes an error's ``.dataset`` to ``--out`` unless the error's
    ``handled_out`` names that file (the raiser wrote it, or said why not): decided by the
    attribute, not by whether the message happens to contain the path."""
    import argparse

    import xarray as xr

    from meanfield.cli import _keep
    from meanfield.integrate import IntegrationError, StopReason

    out = tmp_path / "run.nc"
    ds = xr.Dataset({"x": ("t", [1.0, 2.0])})
    args = argparse.Namespace(out=out)
    exc = IntegrationError(f"failed; see {out}", ds, 1.0, StopReason.STEP_TOO_SMALL)
    assert _keep(args, exc) == f"; partial results written to {out}"  # named, not handled
    assert out.is_file()
    out.unlink()
    exc.handled_out = str(out)
    assert _keep(args, exc) == "" and not out.exists()
