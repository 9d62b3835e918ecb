"""The health table and checks/health are tied: every rule has a check and every check a rule, a check renamed
without the table is refused, and the checks only read facts and assert."""

from __future__ import annotations

import ast

import pytest
from health_world import CHECKS, HealthWorld

from gpuharness.core.rules import Rule
from gpuharness.health.checks_table import HEALTH_CHECKS, HealthCheck, HealthChecks


def check_names(source: str) -> list[str]:
    """The test functions of a health suite: those that take the `health` fixture."""
    tree = ast.parse(source)
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef)
            and node.name.startswith("test_") and "health" in {arg.arg for arg in node.args.args}]


def renamed(source: str, old: str, new: str) -> str:
    assert f"def {old}(" in source
    return source.replace(f"def {old}(", f"def {new}(")


def test_every_health_rule_has_a_check_and_every_check_a_rule():
    names = check_names(CHECKS.read_text())
    assert HEALTH_CHECKS.unmatched(names) == ([], [])
    assert names == [check.test_name for check in HEALTH_CHECKS], "checks/health follows the table's order"


def test_renaming_a_check_without_the_table_breaks_the_tie():
    source = renamed(CHECKS.read_text(), "test_gpu_matches_order", "test_gpu_is_the_one_ordered")
    assert HEALTH_CHECKS.unmatched(check_names(source)) == (["test_gpu_matches_order"],
                                                            ["test_gpu_is_the_one_ordered"])


def test_a_check_the_table_lacks_is_refused_at_collection(pytester, tmp_path):
    world = HealthWorld(tmp_path / "world")
    try:
        world.add("dep_ok")
        suite = pytester.path / "test_health.py"
        suite.write_text(renamed(CHECKS.read_text(), "test_gpu_matches_order", "test_gpu_is_the_one_ordered"))
        result = pytester.runpytest_inprocess(str(suite), "--registry", str(world.registry.root), "--gpu-mode",
                                              "live", "-p", "no:cacheprovider")
        assert result.ret != pytest.ExitCode.OK
        result.stdout.fnmatch_lines(["*test_health.py::test_gpu_is_the_one_ordered is not a check of the health "
                                     "table: declare it in gpuharness.health.checks_table*"])
        assert "Traceback" not in result.stdout.str()
        assert world.hosts["dep_ok"].stats["ssh_connections"] == 0, "nothing ran against the host"
        assert world.deployment("dep_ok")["status"] == "health-checking"
    finally:
        world.close()


def test_the_ready_gates_required_checks_are_the_tables():
    assert HEALTH_CHECKS.ids()[0] == "host_reachable" and len(HEALTH_CHECKS.ids()) == 16
    assert HEALTH_CHECKS.may_skip() == {"cuda_smoke_test", "job_progress_advanced", "gpu_performs_like_its_class",
                                        "shutdown_guard_armed"}
    assert HEALTH_CHECKS.serverless() == {"service_health_endpoint", "test_generation_succeeds"}
    assert all(check.rule.title and check.rule.reads for check in HEALTH_CHECKS)


def test_a_check_declared_twice_is_refused():
    rule = Rule("gpu_matches_order", "GPU matches", ("probe.gpus",))
    with pytest.raises(ValueError, match="health rule 'gpu_matches_order' is declared twice"):
        HealthChecks([HealthCheck(rule), HealthCheck(rule)])


def test_an_unknown_check_id_names_the_declared_ones():
    with pytest.raises(KeyError, match="no health rule 'gpu_ok'; declared: host_reachable, gpu_matches_order"):
        HEALTH_CHECKS["gpu_ok"]


def test_health_checks_read_facts_and_write_nothing():
    """checks/health imports only the rules: no journal, registry writes, HTTP clients or plugin internals."""
    tree = ast.parse(CHECKS.read_text())
    imported = sorted({node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
                      | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names})
    assert imported == ["__future__", "gpuharness.health"]
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert names <= {"annotations", "rules"}
    calls = {node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute)}
    assert not calls & {"update", "transition", "journal", "observe", "write_text", "Client"}, calls

