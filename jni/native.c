#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "native.h"
#include "_cgo_export.h"

static jclass exception_class[SPILLWAY_EXCEPTION_KINDS];
static jmethodID exception_ctor[SPILLWAY_EXCEPTION_KINDS];

static jmethodID buffer_limit, buffer_has_array, buffer_array, buffer_array_offset, buffer_get_abs, buffer_read_only;

static jclass global_class(JNIEnv *env, const char *name) {
	jclass local = (*env)->FindClass(env, name);
	if (local == NULL) {
		return NULL;
	}
	jclass global = (jclass)(*env)->NewGlobalRef(env, local);
	(*env)->DeleteLocalRef(env, local);
	return global;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
	JNIEnv *env;
	if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) {
		return JNI_ERR;
	}
	static const char *names[SPILLWAY_EXCEPTION_KINDS] = {
		"java/io/IOException",
		"java/lang/IllegalArgumentException",
		"java/lang/IllegalStateException",
		"spillway/SpillLimitExceededException",
		"java/lang/RuntimeException",
		"java/lang/OutOfMemoryError",
	};
	for (int i = 0; i < SPILLWAY_EXCEPTION_KINDS; i++) {
		exception_class[i] = global_class(env, names[i]);
		if (exception_class[i] == NULL && i == SPILLWAY_LIMIT_EXCEEDED) {
			// Loaded without the shim's classes on the class path: still say what happened.
			(*env)->ExceptionClear(env);
			exception_class[i] = exception_class[SPILLWAY_IO_EXCEPTION];
		}
		if (exception_class[i] == NULL) {
			return JNI_ERR;
		}
		exception_ctor[i] = (*env)->GetMethodID(env, exception_class[i], "<init>", "(Ljava/lang/String;)V");
		if (exception_ctor[i] == NULL) {
			return JNI_ERR;
		}
	}
	jclass buffer = (*env)->FindClass(env, "java/nio/ByteBuffer");
	if (buffer == NULL) {
		return JNI_ERR;
	}
	// Method IDs stay valid while the class is loaded, and ByteBuffer is never unloaded.
	buffer_limit = (*env)->GetMethodID(env, buffer, "limit", "()I");
	buffer_has_array = (*env)->GetMethodID(env, buffer, "hasArray", "()Z");
	buffer_array = (*env)->GetMethodID(env, buffer, "array", "()[B");
	buffer_array_offset = (*env)->GetMethodID(env, buffer, "arrayOffset", "()I");
	buffer_get_abs = (*env)->GetMethodID(env, buffer, "get", "(I[BII)Ljava/nio/ByteBuffer;");
	buffer_read_only = (*env)->GetMethodID(env, buffer, "isReadOnly", "()Z");
	(*env)->DeleteLocalRef(env, buffer);
	if (!buffer_limit || !buffer_has_array || !buffer_array || !buffer_array_offset || !buffer_get_abs ||
	    !buffer_read_only) {
		return JNI_ERR;
	}
	return JNI_VERSION_1_8;
}

void spillway_throw(JNIEnv *env, int kind, const jchar *msg, jsize len) {
	if ((*env)->ExceptionCheck(env)) {
		return; // the JVM's own exception (an OutOfMemoryError, say) says more than ours
	}
	if (kind < 0 || kind >= SPILLWAY_EXCEPTION_KINDS) {
		kind = SPILLWAY_INTERNAL_ERROR;
	}
	jstring text = (*env)->NewString(env, msg, len);
	if (text == NULL) {
		return;
	}
	jthrowable ex = (jthrowable)(*env)->NewObject(env, exception_class[kind], exception_ctor[kind], text);
	(*env)->DeleteLocalRef(env, text);
	if (ex != NULL) {
		(*env)->Throw(env, ex);
		(*env)->DeleteLocalRef(env, ex);
	}
}

// grow_strings makes room for at least need bytes in out's block, keeping its first used bytes.
static int grow_strings(spillway_strings *out, size_t *cap, size_t used, size_t need) {
	size_t grown = *cap * 2 > need ? *cap * 2 : need + 512;
	unsigned char *block;
	if (out->allocated) {
		block = realloc(out->block, grown);
	} else if ((block = malloc(grown)) != NULL && used > 0) {
		memcpy(block, out->block, used);
	}
	if (block == NULL) {
		return SPILLWAY_STRINGS_NO_MEMORY;
	}
	out->block = block;
	out->allocated = 1;
	*cap = grown;
	return SPILLWAY_STRINGS_OK;
}

// Up to this many elements, their local references are left to the JVM, which frees them when the
// native method returns: a native method may always hold 16, and this leaves room for the few an
// exception takes (spillway_throw). A longer array has each deleted as soon as it is read.
enum { STRINGS_KEPT_REFS = 12 };

static int read_strings(JNIEnv *env, jobjectArray arr, jsize n, jsize max_chars, jlong max_total, spillway_strings *out,
                        void *buf, size_t buf_len) {
	size_t head = (size_t)(n + 1) * sizeof(jsize); // count and ends, before the chars
	size_t cap = buf_len; // bytes of out->block
	out->block = buf;
	if (buf == NULL || cap < head) {
		cap = 0;
		int status = grow_strings(out, &cap, 0, head + (n < 64 ? 64 : (size_t)n) * sizeof(jchar));
		if (status != SPILLWAY_STRINGS_OK) {
			return status;
		}
	}
	size_t used = head; // bytes of out->block in use
	jlong total = 0;
	for (jsize i = 0; i < n; i++) {
		// Cannot throw: i is within the array.
		jstring s = (jstring)(*env)->GetObjectArrayElement(env, arr, i);
		int status = SPILLWAY_STRINGS_OK;
		jsize len = 0;
		if (s == NULL) {
			status = (*env)->ExceptionCheck(env) ? SPILLWAY_STRINGS_PENDING : SPILLWAY_STRINGS_NULL_ELEMENT;
		} else {
			len = (*env)->GetStringLength(env, s);
			total += (jlong)len + 1;
			if (len > max_chars) {
				status = SPILLWAY_STRINGS_PATH_TOO_LONG;
				out->length = len;
			} else if (total > max_total) {
				status = SPILLWAY_STRINGS_TOO_MUCH;
			} else if (used + (size_t)len * sizeof(jchar) > cap) {
				status = grow_strings(out, &cap, used, used + (size_t)len * sizeof(jchar));
			}
		}
		if (status == SPILLWAY_STRINGS_OK && len > 0) {
			// Cannot throw either: the region is the whole string, whose length is final.
			(*env)->GetStringRegion(env, s, 0, len, (jchar *)(out->block + used));
		}
		if (s != NULL && n > STRINGS_KEPT_REFS) {
			(*env)->DeleteLocalRef(env, s);
		}
		if (status != SPILLWAY_STRINGS_OK) {
			out->index = i;
			return status;
		}
		used += (size_t)len * sizeof(jchar);
		((jsize *)out->block)[i + 1] = (jsize)((used - head) / sizeof(jchar));
		out->count = i + 1;
	}
	if ((*env)->ExceptionCheck(env)) { // what cannot happen above, checked once
		return SPILLWAY_STRINGS_PENDING;
	}
	((jsize *)out->block)[0] = n;
	out->key_len = used;
	return SPILLWAY_STRINGS_OK;
}

int spillway_read_strings(JNIEnv *env, jobjectArray arr, jsize max_chars, jlong max_total, spillway_strings *out,
                          void *buf, size_t buf_len) {
	memset(out, 0, sizeof *out);
	if (arr == NULL) {
		return SPILLWAY_STRINGS_NULL_ARRAY;
	}
	jsize n = (*env)->GetArrayLength(env, arr);
	out->length = n;
	if ((jlong)n > max_total) { // every element counts one toward max_total
		out->index = n - 1;
		return SPILLWAY_STRINGS_TOO_MUCH;
	}
	int status = read_strings(env, arr, n, max_chars, max_total, out, buf, buf_len);
	if (out->block != NULL) {
		out->ends = (jsize *)out->block + 1;
		out->chars = (jchar *)(out->block + (size_t)(n + 1) * sizeof(jsize));
	}
	return status;
}

void spillway_free_strings(spillway_strings *s) {
	if (s->allocated) {
		free(s->block);
	}
	s->block = NULL;
	s->allocated = 0;
	s->chars = NULL;
	s->ends = NULL;
}

// createPlan(String[], ...): the array is read here, into this frame's memory for a usual list,
// and the plan made by spillway_jni_create_plan (exports.go) from what was read, so the call
// crosses into Go once and never back into C.
static jlong create_plan(JNIEnv *env, jobjectArray local_dirs, jlong limit, jlong executor_limit) {
	_Alignas(jlong) unsigned char buf[4096];
	spillway_strings read;
	int status = spillway_read_strings(env, local_dirs, SPILLWAY_MAX_DIR_PATH_LEN, SPILLWAY_MAX_DIR_LIST_LEN, &read,
	                                   buf, sizeof buf);
	jlong plan = spillway_jni_create_plan(env, status, &read, limit, executor_limit);
	spillway_free_strings(&read);
	return plan;
}

// The card's call: no executor limit.
JNIEXPORT jlong JNICALL Java_spillway_NativeSpill_createPlan(JNIEnv *env, jclass cls, jobjectArray local_dirs,
                                                             jlong max_temp_directory_size) {
	return create_plan(env, local_dirs, max_temp_directory_size, INT64_MAX);
}

JNIEXPORT jlong JNICALL Java_spillway_NativeSpill_createPlanWithExecutorLimit(JNIEnv *env, jclass cls,
                                                                              jobjectArray local_dirs,
                                                                              jlong max_temp_directory_size,
                                                                              jlong max_executor_temp_directory_size) {
	return create_plan(env, local_dirs, max_temp_directory_size, max_executor_temp_directory_size);
}

int spillway_buffer(JNIEnv *env, jobject buf, jint *limit, void **addr) {
	*limit = (*env)->CallIntMethod(env, buf, buffer_limit);
	if ((*env)->ExceptionCheck(env)) {
		return -1;
	}
	*addr = (*env)->GetDirectBufferAddress(env, buf);
	return 0;
}

// backing_array returns a heap buffer's array (a local ref) and sets *base to the array index
// of the buffer's index 0; NULL with an exception pending if the JVM failed.
static jbyteArray backing_array(JNIEnv *env, jobject buf, jint *base) {
	*base = (*env)->CallIntMethod(env, buf, buffer_array_offset);
	if ((*env)->ExceptionCheck(env)) {
		return NULL;
	}
	jbyteArray array = (jbyteArray)(*env)->CallObjectMethod(env, buf, buffer_array);
	if ((*env)->ExceptionCheck(env)) {
		if (array != NULL) {
			(*env)->DeleteLocalRef(env, array);
		}
		return NULL;
	}
	return array;
}

int spillway_copy_heap_buffer(JNIEnv *env, jobject buf, jint offset, jint length, void *dst) {
	jboolean has_array = (*env)->CallBooleanMethod(env, buf, buffer_has_array);
	if ((*env)->ExceptionCheck(env)) {
		return -1;
	}
	if (has_array) {
		jint base;
		jbyteArray array = backing_array(env, buf, &base);
		if (array == NULL) {
			return -1;
		}
		(*env)->GetByteArrayRegion(env, array, base + offset, length, (jbyte *)dst);
		(*env)->DeleteLocalRef(env, array);
		return (*env)->ExceptionCheck(env) ? -1 : 0;
	}
	// A read-only heap buffer hides its array: copy through ByteBuffer.get(int, byte[], int, int).
	enum { CHUNK = 64 * 1024 };
	jbyteArray chunk = (*env)->NewByteArray(env, length < CHUNK ? length : CHUNK);
	if (chunk == NULL) {
		return -1;
	}
	for (jint done = 0; done < length;) {
		jint n = length - done < CHUNK ? length - done : CHUNK;
		jobject self = (*env)->CallObjectMethod(env, buf, buffer_get_abs, offset + done, chunk, 0, n);
		if ((*env)->ExceptionCheck(env)) {
			(*env)->DeleteLocalRef(env, chunk);
			return -1;
		}
		(*env)->DeleteLocalRef(env, self);
		(*env)->GetByteArrayRegion(env, chunk, 0, n, (jbyte *)dst + done);
		done += n;
	}
	(*env)->DeleteLocalRef(env, chunk);
	return 0;
}

void *spillway_malloc(size_t size) {
	return malloc(size);
}

jstring spillway_new_string(JNIEnv *env, const jchar *chars, jsize len) {
	return (*env)->NewString(env, chars, len);
}

jobjectArray spillway_new_string_array(JNIEnv *env, jsize n) {
	jclass string = (*env)->FindClass(env, "java/lang/String");
	if (string == NULL) {
		return NULL;
	}
	jobjectArray arr = (*env)->NewObjectArray(env, n, string, NULL);
	(*env)->DeleteLocalRef(env, string);
	return arr;
}

int spillway_set_string(JNIEnv *env, jobjectArray arr, jsize i, jstring s) {
	(*env)->SetObjectArrayElement(env, arr, i, s);
	(*env)->DeleteLocalRef(env, s);
	return (*env)->ExceptionCheck(env) ? -1 : 0;
}

jsize spillway_array_length(JNIEnv *env, jarray arr) {
	return (*env)->GetArrayLength(env, arr);
}

void spillway_set_longs(JNIEnv *env, jlongArray arr, const jlong *vals, jsize n) {
	(*env)->SetLongArrayRegion(env, arr, 0, n, vals);
}

int spillway_buffer_read_only(JNIEnv *env, jobject buf) {
	jboolean ro = (*env)->CallBooleanMethod(env, buf, buffer_read_only);
	if ((*env)->ExceptionCheck(env)) {
		return -1;
	}
	return ro ? 1 : 0;
}

int spillway_copy_to_heap_buffer(JNIEnv *env, jobject buf, jint offset, jint length, const void *src) {
	jint base;
	jbyteArray array = backing_array(env, buf, &base);
	if (array == NULL) {
		return -1;
	}
	(*env)->SetByteArrayRegion(env, array, base + offset, length, (const jbyte *)src);
	(*env)->DeleteLocalRef(env, array);
	return (*env)->ExceptionCheck(env) ? -1 : 0;
}

int spillway_read_string(JNIEnv *env, jstring s, jsize max, jchar *dst, jsize *len) {
	*len = (*env)->GetStringLength(env, s);
	if ((*env)->ExceptionCheck(env)) {
		return -1;
	}
	if (*len <= max) {
		(*env)->GetStringRegion(env, s, 0, *len, dst);
	}
	return (*env)->ExceptionCheck(env) ? -1 : 0;
}
