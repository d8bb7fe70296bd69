"""The reliability matrix (issue #37): bad inputs and faults a user meets, each with what the package must do.

A row is checked here (``Refused``: the command line refuses it in one line, exit status 2, before anything is
computed) or names the test elsewhere that provokes that fault (``Covered``): this file fails if that test is
gone, so the matrix cannot silently shrink. Every row has a check; none is a defect today.
"""
import ast
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from replicate.cli.main import main

TESTS = Path(__file__).parent


@dataclass(frozen=True)
class Refused:
    fault: str
    argv: tuple[str, ...]
    says: str  # in the one line
    env: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)  # name → bytes, written into a temporary folder ({tmp} in argv/env)


@dataclass(frozen=True)
class Covered:
    fault: str
    test: str  # file::function


MATRIX = (
    # ---- the command line: arguments and knobs
    Refused("an unknown figure", ("figures", "nosuch/fig"), "unknown figure 'nosuch/fig'"),
    Refused("a knob the figure does not have", ("figures", "li2020/fig2", "--set", "nosuch=1"), "nosuch"),
    Refused("a knob of the wrong type", ("figures", "li2020/fig2", "--set", "rounds=abc"), "rounds"),
    Refused("a knob out of range", ("figures", "li2020/fig2", "--set", "rounds=0"), "rounds"),
    Refused("a list cut short in --set", ("figures", "li2020/fig2", "--set", "local_steps=[1,5"), "not a whole JSON list"),
    Refused("--set without a value", ("figures", "li2020/fig2", "--set", "rounds"), "--set expects NAME=VALUE"),
    Refused("an out_dir inside the committed figures", ("figures", "li2020/fig2", "--set", "out_dir=figures"),
            "committed figures"),
    Refused("a data source that is neither official nor stand-in",
            ("figures", "khanduri2021/fig2", "--set", "data_source=jpeg"), "data_source must be one of"),
    Refused("a time budget that is no duration", ("figures", "li2020/fig2", "--time-budget", "soon"), "soon"),
    Refused("--check with knobs of no reduced-scale command",
            ("figures", "--check", "--profile", "paper", "--set", "rounds=3", "li2020/fig2"), "--check"),
    # ---- the environment
    Refused("an unknown device", ("figures", "li2020/fig2"), "REPLICATE_DEVICE must be", {"REPLICATE_DEVICE": "tpu"}),
    Refused("an unknown executor", ("figures", "li2020/fig2"), "REPLICATE_EXECUTOR", {"REPLICATE_EXECUTOR": "slurm"}),
    Refused("a worker count that is no count", ("figures", "li2020/fig2"), "REPLICATE_WORKERS",
            {"REPLICATE_WORKERS": "many"}),
    Refused("a stand-in switch that is neither 0 nor 1", ("figures", "khanduri2021/fig2"), "REPLICATE_STAND_INS must be",
            {"REPLICATE_STAND_INS": "yes"}),
    Refused("a local data source that does not exist", ("data", "fetch", "mnist"), "is not a folder",
            {"REPLICATE_DATA_FROM": "{tmp}/nowhere"}),
    # ---- data
    Refused("fetch without a dataset", ("data", "fetch"), "name the dataset(s) to fetch"),
    Refused("pack without a dataset", ("data", "pack"), "name the dataset(s) to pack"),
    Refused("an unknown dataset", ("data", "fetch", "imagenet"), "no downloadable dataset named 'imagenet'"),
    Refused("--from a folder that does not exist", ("data", "fetch", "mnist", "--from", "{tmp}/nowhere"),
            "does not exist"),
    # ---- carrying runs
    Refused("importing a file that is no archive", ("cache", "import", "{tmp}/runs.tar.xz"), "runs.tar.xz",
            files={"runs.tar.xz": b"this is not an archive"}),
    Refused("importing a file that is not there", ("cache", "import", "{tmp}/missing.tar.xz"), "missing.tar.xz"),
    # ---- faults met while computing: provoked by their own tests
    Covered("a run-cache entry truncated, flipped, emptied or without its sidecar",
            "test_cache_integrity.py::test_a_damaged_entry_is_recomputed_and_never_used"),
    Covered("a run cache that cannot be written", "test_cache_integrity.py::test_a_cache_that_cannot_be_written_is_refused_before_any_compute"),
    Covered("a cache archive with ../ paths or links", "test_archive.py::test_paths_outside_the_cache_are_refused"),
    Covered("a cache archive with a flipped byte", "test_archive.py::test_a_tampered_entry_is_refused_and_nothing_is_written"),
    Covered("a cut cache archive", "test_archive.py::test_a_truncated_archive_is_one_line"),
    Covered("an edited or damaged ledger piece", "test_ledger.py::test_a_damaged_or_edited_piece_is_never_used"),
    Covered("Ctrl-C during a batch", "test_runner.py::test_ctrl_c_ends_with_one_line_and_keeps_figures"),
    Covered("a run stopped mid-way", "test_resume.py::test_a_run_stopped_at_a_round_resumes_bitwise"),
    Covered("an unreadable checkpoint", "test_resume.py::test_an_unreadable_checkpoint_starts_the_run_over"),
    Covered("a crafted checkpoint carrying code, in the cache or an imported pack",
            "test_checkpoint_safety.py::test_a_crafted_checkpoint_in_an_imported_pack_never_runs"),
    Covered("a time budget running out", "test_runner.py::test_time_budget_stops_the_running_notebook_as_ctrl_c_does"),
    Covered("two runs of one notebook at once", "test_runner.py::test_two_runs_of_one_notebook_at_once_both_succeed"),
    Covered("an unwritable out_dir", "test_runner.py::test_an_unwritable_out_dir_is_one_line_before_anything_runs"),
    Covered("a refusal inside a notebook cell", "test_runner.py::test_a_refusal_in_a_notebook_cell_is_its_one_line"),
    Covered("a damaged data cache", "test_runner.py::test_a_damaged_data_cache_met_in_a_notebook_is_said_on_the_terminal"),
    Covered("a killed Ray worker", "test_executors.py::test_a_ray_sweep_survives_a_killed_worker_and_caches_the_local_pools_bytes"),
    Covered("an address that answers but is not Ray", "test_executors.py::test_an_address_that_answers_but_is_not_ray_is_one_line_within_the_probe"),
    Covered("an unreachable Ray cluster", "test_executors.py::test_the_command_line_refuses_an_unreachable_cluster_in_one_line_before_any_notebook"),
    Covered("no internet during data fetch", "test_data_sources.py::test_offline_download_says_so_and_how_to_stage_by_hand"),
    Covered("a download with a corrupted byte, a 404 or a stall", "test_data_download.py::test_each_fault_is_one_clear_line_and_stages_nothing"),
    Covered("a download cut short", "test_data_download.py::test_a_cut_download_resumes_where_it_stopped"),
    Covered("an archive whose checksum differs", "test_data_sources.py::test_archive_checksum_mismatch_names_both_hashes_and_stages_nothing"),
    Covered("a dataset pack changed, cut or incomplete", "test_data_store.py::test_a_damaged_pack_is_refused_and_nothing_is_staged"),
    Covered("a checkpoint pack damaged, cut or holding a foreign member",
            "test_resume.py::test_a_damaged_or_foreign_checkpoint_pack_is_refused_whole"),
)
REFUSED = [row for row in MATRIX if isinstance(row, Refused)]


@pytest.mark.parametrize("row", REFUSED, ids=[row.fault for row in REFUSED])
def test_a_bad_input_is_refused_in_one_line_before_anything_runs(row, tmp_path, monkeypatch, capsys):
    for name, data in row.files.items():
        (tmp_path / name).write_bytes(data)
    for name, value in row.env.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    start = time.monotonic()
    status = main([arg.format(tmp=tmp_path) for arg in row.argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2, (row.fault, err)
    assert len(err) == 1 and err[0].startswith("error: ") and row.says in err[0], (row.fault, err)
    assert time.monotonic() - start < 30  # refused before any notebook or run starts
    assert not (tmp_path / "build" / "executed").exists() and not (tmp_path / "build" / "cache").exists()


def _functions(path: Path) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}


def test_every_fault_provoked_elsewhere_still_has_its_test():
    missing = []
    for row in MATRIX:
        if isinstance(row, Covered):
            file, _, function = row.test.partition("::")
            if function not in _functions(TESTS / file):
                missing.append(row.test)
    assert not missing, missing
    assert len(MATRIX) >= 30 and len({row.fault for row in MATRIX}) == len(MATRIX)
