/* Prints where ioobserve/python/layouts.py reads each value of _Py_DebugOffsets (3.13+), the
 * struct sizes beside them, and PyASCIIObject.state's bit masks, from the CPython headers this
 * is compiled against (tests/unit/test_python_layouts.py; with -DPy_GIL_DISABLED=1 for the
 * free-threaded build): "name value" lines. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#if PY_VERSION_HEX >= 0x030e0000
#include "internal/pycore_debug_offsets.h"
#else
#include "internal/pycore_runtime.h"
#endif
#define D(name, path) printf("%s %ld\n", name, (long)offsetof(_Py_DebugOffsets, path))

/* The state word with one bit field set to all ones: its mask. */
#define STATE_MASK(field, ones) do { \
	PyASCIIObject object; \
	unsigned int word = 0; \
	memset(&object, 0, sizeof(object)); \
	object.state.field = ones; \
	memcpy(&word, &object.state, sizeof(word)); \
	printf("%s %u\n", "unicode_" #field "_mask", word); \
} while (0)

int main(void)
{
	D("runtime_interpreters", runtime_state.interpreters_head);
	D("interp_next", interpreter_state.next);
	D("interp_threads", interpreter_state.threads_head);
	D("tstate_next", thread_state.next);
	D("tstate_frame", thread_state.current_frame);
	D("tstate_native_id", thread_state.native_thread_id);
	D("frame_previous", interpreter_frame.previous);
	D("frame_code", interpreter_frame.executable);
	D("frame_instr", interpreter_frame.instr_ptr);
	D("frame_localsplus", interpreter_frame.localsplus);
	D("frame_owner", interpreter_frame.owner);
	D("code_filename", code_object.filename);
	D("code_qualname", code_object.qualname);
	D("code_linetable", code_object.linetable);
	D("code_firstlineno", code_object.firstlineno);
	D("code_argcount", code_object.argcount);
	D("code_adaptive", code_object.co_code_adaptive);
	D("bytes_size", bytes_object.ob_size);
	D("bytes_data", bytes_object.ob_sval);
	D("unicode_state", unicode_object.state);
	D("unicode_length", unicode_object.length);
	D("unicode_ascii_data", unicode_object.asciiobject_size);
#if PY_VERSION_HEX >= 0x030e0000
	D("frame_tlbc_index", interpreter_frame.tlbc_index);
	D("code_tlbc", code_object.co_tlbc);
#endif
	D("size.runtime", runtime_state.size);
	D("size.interp", interpreter_state.size);
	D("size.tstate", thread_state.size);
	D("size.frame", interpreter_frame.size);
	D("size.code", code_object.size);
	D("size.bytes", bytes_object.size);
	D("size.unicode", unicode_object.size);
	printf("size.debug_offsets %ld\n", (long)sizeof(_Py_DebugOffsets));
	STATE_MASK(kind, 7);
	STATE_MASK(ascii, 1);
	return 0;
}
