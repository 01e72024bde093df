// C side of the JNI layer: the JNI calls themselves, which cgo cannot make through the JNIEnv's
// function table. Class and method IDs are cached at JNI_OnLoad and used from any Java thread.
#ifndef SPILLWAY_NATIVE_H
#define SPILLWAY_NATIVE_H

#include <stddef.h>
#include <jni.h>

// Exception kinds, in the order of plan.ErrorKind, then the library's own.
enum {
	SPILLWAY_IO_EXCEPTION = 0,
	SPILLWAY_ILLEGAL_ARGUMENT = 1,
	SPILLWAY_ILLEGAL_STATE = 2,
	SPILLWAY_LIMIT_EXCEEDED = 3,
	SPILLWAY_INTERNAL_ERROR = 4,
	SPILLWAY_OUT_OF_MEMORY = 5,
	SPILLWAY_EXCEPTION_KINDS = 6
};

// Throws a new exception of the kind with a UTF-16 message; leaves any exception already pending.
void spillway_throw(JNIEnv *env, int kind, const jchar *msg, jsize len);

// The UTF-16 chars of a String[]'s elements, in C memory (a block of the caller's, or malloc'd
// when it is too small; free with spillway_free_strings): element i is chars[ends[i-1] (0 for
// i = 0), ends[i]). The block is laid out as [count][ends][chars] (count and ends as jsize, chars
// as jchar, host order): its first key_len bytes are an exact encoding of what was read, the key
// of a dir set by its content.
typedef struct {
	unsigned char *block;
	int allocated; // block was malloc'd
	size_t key_len; // bytes of block in use, once the read succeeded
	jchar *chars;
	jsize *ends;
	jsize count;  // elements read
	jsize index;  // the element a failure is about
	jlong length; // the failing element's length, or the array's for TOO_MUCH and NO_MEMORY
} spillway_strings;

enum {
	SPILLWAY_STRINGS_OK = 0,
	SPILLWAY_STRINGS_PENDING = 1,       // a JNI call failed, normally with an exception pending
	SPILLWAY_STRINGS_NULL_ELEMENT = 2,  // arr[index] is null
	SPILLWAY_STRINGS_PATH_TOO_LONG = 3, // arr[index] has more than max_chars chars
	SPILLWAY_STRINGS_TOO_MUCH = 4,      // the elements up to arr[index] pass max_total chars (one counted per element)
	SPILLWAY_STRINGS_NO_MEMORY = 5,     // malloc failed
	SPILLWAY_STRINGS_NULL_ARRAY = 6     // arr is null (not read)
};

// The bounds of a String[] of dirs, plan.MaxDirPathLen and plan.MaxDirListLen (strings.go checks
// that they are the same).
#define SPILLWAY_MAX_DIR_PATH_LEN (32 << 10)
#define SPILLWAY_MAX_DIR_LIST_LEN (16 << 20)

// Reads every element of arr once: its reference, then its length and chars from that same
// reference. Up to 12 elements, their references stay until the native method returns (within the
// 16 a native method may hold); past that each is deleted once read, so any number of elements
// needs only a few local references. The chars go into buf (buf_len bytes; NULL for none) while they fit, else into malloc'd memory.
// Returns one of SPILLWAY_STRINGS_*; out holds what was read so far either way.
int spillway_read_strings(JNIEnv *env, jobjectArray arr, jsize max_chars, jlong max_total, spillway_strings *out,
                          void *buf, size_t buf_len);

// Frees what spillway_read_strings allocated (safe on a zeroed or failed read).
void spillway_free_strings(spillway_strings *s);

// Describes a ByteBuffer: its limit, and its address if it is direct (else NULL). Returns 0, or
// -1 with an exception pending.
int spillway_buffer(JNIEnv *env, jobject buf, jint *limit, void **addr);

// Returns 1 if buf is read-only, 0 if not, -1 with an exception pending.
int spillway_buffer_read_only(JNIEnv *env, jobject buf);

// Copies length bytes at absolute index offset of a heap ByteBuffer (read-only ones included)
// into dst, leaving its position alone. Returns 0, or -1 with an exception pending.
int spillway_copy_heap_buffer(JNIEnv *env, jobject buf, jint offset, jint length, void *dst);

// Copies length bytes from src into a writable heap ByteBuffer at absolute index offset, leaving
// its position alone. Returns 0, or -1 with an exception pending.
int spillway_copy_to_heap_buffer(JNIEnv *env, jobject buf, jint offset, jint length, const void *src);

// Reads a Java string's length into *len, and its UTF-16 chars into dst if it has at most max
// chars (else only the length). Returns 0, or -1 with an exception pending.
int spillway_read_string(JNIEnv *env, jstring s, jsize max, jchar *dst, jsize *len);

// malloc, which returns NULL when memory is short (cgo's C.malloc aborts the process instead).
void *spillway_malloc(size_t size);

// Returns the length of arr.
jsize spillway_array_length(JNIEnv *env, jarray arr);

// Copies n longs into arr from index 0 (arr holds at least n).
void spillway_set_longs(JNIEnv *env, jlongArray arr, const jlong *vals, jsize n);

// Returns a new Java string from UTF-16, or NULL with an exception pending.
jstring spillway_new_string(JNIEnv *env, const jchar *chars, jsize len);

// Returns a new String[n] of nulls, or NULL with an exception pending.
jobjectArray spillway_new_string_array(JNIEnv *env, jsize n);

// Stores s at arr[i] and deletes the local reference s. Returns 0, or -1 with an exception pending.
int spillway_set_string(JNIEnv *env, jobjectArray arr, jsize i, jstring s);

#endif
