/* Prints the offsets ioobserve/python/layouts.py tabulates, from the CPython headers this is
 * compiled against (tests/unit/test_python_layouts.py): "name value" lines. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_frame.h"
#else
#include "frameobject.h"
#endif
#define P(name, expr) printf("%s %ld\n", name, (long)(expr))

int main(void)
{
	P("runtime_interpreters", offsetof(_PyRuntimeState, interpreters.head));
	P("interp_next", offsetof(PyInterpreterState, next));
	P("tstate_next", offsetof(PyThreadState, next));
#if PY_VERSION_HEX >= 0x030b0000
	P("interp_threads", offsetof(PyInterpreterState, threads.head));
	P("tstate_native_id", offsetof(PyThreadState, native_thread_id));
	P("frame_previous", offsetof(_PyInterpreterFrame, previous));
	P("frame_owner", offsetof(_PyInterpreterFrame, owner));
	P("frame_localsplus", offsetof(_PyInterpreterFrame, localsplus));
	P("code_qualname", offsetof(PyCodeObject, co_qualname));
	P("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#else
	P("interp_threads", offsetof(PyInterpreterState, tstate_head));
	P("frame_previous", offsetof(PyFrameObject, f_back));
	P("frame_code", offsetof(PyFrameObject, f_code));
	P("frame_instr", offsetof(PyFrameObject, f_lasti));
	P("frame_localsplus", offsetof(PyFrameObject, f_localsplus));
	P("code_qualname", offsetof(PyCodeObject, co_name));  /* 3.10 has no co_qualname */
	P("tstate_frame", offsetof(PyThreadState, frame));
	P("tstate_native_id", offsetof(PyThreadState, thread_id));  /* pthread_self(): matched by thread pointer */
#endif
#if PY_VERSION_HEX >= 0x030d0000
	P("tstate_frame", offsetof(PyThreadState, current_frame));
	P("frame_code", offsetof(_PyInterpreterFrame, f_executable));
	P("frame_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#elif PY_VERSION_HEX >= 0x030b0000
	P("tstate_frame", offsetof(PyThreadState, cframe));
	P("cframe_frame", offsetof(_PyCFrame, current_frame));
	P("frame_code", offsetof(_PyInterpreterFrame, f_code));
	P("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
#endif
#if PY_VERSION_HEX >= 0x030e0000
	P("owner_shim", FRAME_OWNED_BY_INTERPRETER);  /* and FRAME_OWNED_BY_CSTACK above it in 3.14 */
#elif PY_VERSION_HEX >= 0x030c0000
	P("owner_shim", FRAME_OWNED_BY_CSTACK);
#endif
	P("code_argcount", offsetof(PyCodeObject, co_argcount));
	P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
	P("code_filename", offsetof(PyCodeObject, co_filename));
	P("code_linetable", offsetof(PyCodeObject, co_linetable));
	P("unicode_length", offsetof(PyASCIIObject, length));
	P("unicode_state", offsetof(PyASCIIObject, state));
	P("unicode_ascii_data", sizeof(PyASCIIObject));
	P("unicode_compact_data", sizeof(PyCompactUnicodeObject));
	P("bytes_size", offsetof(PyVarObject, ob_size));
	P("bytes_data", offsetof(PyBytesObject, ob_sval));
	return 0;
}
