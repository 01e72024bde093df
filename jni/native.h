// C side of the JNI layer: the calls that must not pay Go's reflection or allocation, and the
// ones jnigi cannot make (throwing). Cached at JNI_OnLoad, used from any Java thread.
#ifndef SPILLWAY_NATIVE_H
#define SPILLWAY_NATIVE_H

#include <jni.h>

// Exception kinds, in the order of plan.ErrorKind, then the library's own.
enum {
	SPILLWAY_IO_EXCEPTION = 0,
	SPILLWAY_ILLEGAL_ARGUMENT = 1,
	SPILLWAY_ILLEGAL_STATE = 2,
	SPILLWAY_LIMIT_EXCEEDED = 3,
	SPILLWAY_INTERNAL_ERROR = 4,
	SPILLWAY_EXCEPTION_KINDS = 5
};

// Throws a new exception of the kind with a UTF-16 message; leaves any exception already pending.
void spillway_throw(JNIEnv *env, int kind, const jchar *msg, jsize len);

// A set of Strings remembered by global refs: refs[0..n).
typedef struct {
	jobject *refs;
	jsize n;
} spillway_string_set;

// Returns the index of the first of sets[0..count) whose strings are exactly arr's elements, the
// very same objects in the same order; -1 if none is; -2 with an exception pending if the JVM
// failed. Strings are immutable, so identical elements mean identical dirs without reading a
// character. One call from Go looks at every set.
int spillway_find_strings(JNIEnv *env, jobjectArray arr, const spillway_string_set *sets, int count);

// Makes refs[i] a global ref to arr[i] for i < n. Returns 0, or -1 (refs made so far deleted).
int spillway_pin_strings(JNIEnv *env, jobjectArray arr, jobject *refs, jsize n);

// Describes a ByteBuffer: its limit, and its address if it is direct (else NULL). Returns 0, or
// -1 with an exception pending.
int spillway_buffer(JNIEnv *env, jobject buf, jint *limit, void **addr);

// Returns 1 if buf is read-only, 0 if not, -1 with an exception pending.
int spillway_buffer_read_only(JNIEnv *env, jobject buf);

// Copies length bytes at absolute index offset of a heap ByteBuffer (read-only ones included)
// into dst, leaving its position alone. Returns 0, or -1 with an exception pending.
int spillway_copy_heap_buffer(JNIEnv *env, jobject buf, jint offset, jint length, void *dst);

// Returns the length of arr.
jsize spillway_array_length(JNIEnv *env, jarray arr);

// Copies n longs into arr from index 0 (arr holds at least n).
void spillway_set_longs(JNIEnv *env, jlongArray arr, const jlong *vals, jsize n);

// Returns a new Java string from UTF-16, or NULL with an exception pending.
jstring spillway_new_string(JNIEnv *env, const jchar *chars, jsize len);

#endif
