"""The compiled core fuzzed under AddressSanitizer and UndefinedBehaviorSanitizer
(tests/fuzz/fuzz_core.py in a Python that loads the sanitized build): about a minute here,
its examples sized to stay well within 3 minutes on a loaded machine."""

from __future__ import annotations

from tests.conftest import ROOT
from tests.fuzz.sanitized import build, run_pytest

FUZZING = ROOT / "tests" / "fuzz" / "fuzz_core.py"

HANG_SECONDS = 900  # not a time limit on the fuzzing: only what a hung run is stopped after


def test_the_fuzzing_finds_nothing_under_the_sanitizers(tmp_path):
    module = build(tmp_path)
    ran = run_pytest(module, [str(FUZZING)], timeout=HANG_SECONDS)
    report = ran.stdout[-3000:] + ran.stderr[-3000:]
    assert ran.returncode == 0, report
    tests = sum(line.startswith("def test_") for line in FUZZING.read_text().splitlines())
    assert f"{tests} passed" in ran.stdout, report
    assert "ERROR: AddressSanitizer" not in ran.stderr and "runtime error" not in ran.stderr, report


def test_the_sanitizers_would_say_so(tmp_path):
    """The check above can fail: a read past a buffer in a sanitized module aborts the run."""
    source = tmp_path / "overrun.c"
    source.write_text('#include <Python.h>\n'
                      'static PyObject *overrun(PyObject *self, PyObject *args) { (void)self; (void)args;\n'
                      '    char *p = PyMem_Malloc(8); volatile char c = p[8]; (void)c; PyMem_Free(p); Py_RETURN_NONE; }\n'
                      'static PyMethodDef methods[] = {{"overrun", overrun, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};\n'
                      'static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, methods, NULL, NULL, NULL, NULL};\n'
                      'PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&module); }\n')
    module = build(tmp_path, [source])
    test = tmp_path / "overrun_test.py"
    test.write_text("from ioobserve import _core\n\ndef test_overrun():\n    _core.overrun()\n")
    ran = run_pytest(module, [str(test)], timeout=HANG_SECONDS)
    assert ran.returncode != 0
    assert "AddressSanitizer: heap-buffer-overflow" in ran.stderr
