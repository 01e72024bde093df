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

int spillway_read_strings(JNIEnv *env, jobjectArray arr, jsize max_chars, jlong max_total, spillway_strings *out) {
	memset(out, 0, sizeof *out);
	jsize n = (*env)->GetArrayLength(env, arr);
	if ((*env)->ExceptionCheck(env)) {
		return SPILLWAY_STRINGS_PENDING;
	}
	out->length = n;
	if ((jlong)n > max_total) { // every element counts one toward max_total
		out->index = n - 1;
		return SPILLWAY_STRINGS_TOO_MUCH;
	}
	out->ends = malloc((size_t)(n > 0 ? n : 1) * sizeof(jsize));
	if (out->ends == NULL) {
		return SPILLWAY_STRINGS_NO_MEMORY;
	}
	size_t used = 0, cap = 0;
	jlong total = 0;
	for (jsize i = 0; i < n; i++) {
		jstring s = (jstring)(*env)->GetObjectArrayElement(env, arr, i);
		if (s == NULL) {
			if ((*env)->ExceptionCheck(env)) {
				return SPILLWAY_STRINGS_PENDING;
			}
			out->index = i;
			return SPILLWAY_STRINGS_NULL_ELEMENT;
		}
		jsize len = (*env)->GetStringLength(env, s);
		int status = SPILLWAY_STRINGS_OK;
		total += (jlong)len + 1;
		if (len > max_chars) {
			status = SPILLWAY_STRINGS_PATH_TOO_LONG;
			out->length = len;
		} else if (total > max_total) {
			status = SPILLWAY_STRINGS_TOO_MUCH;
		} else if (used + (size_t)len > cap) {
			size_t grown = cap * 2 > used + (size_t)len ? cap * 2 : used + (size_t)len + 256;
			jchar *chars = realloc(out->chars, grown * sizeof(jchar));
			if (chars == NULL) {
				status = SPILLWAY_STRINGS_NO_MEMORY;
			} else {
				out->chars = chars;
				cap = grown;
			}
		}
		if (status == SPILLWAY_STRINGS_OK && len > 0) {
			(*env)->GetStringRegion(env, s, 0, len, out->chars + used);
			if ((*env)->ExceptionCheck(env)) {
				status = SPILLWAY_STRINGS_PENDING;
			}
		}
		(*env)->DeleteLocalRef(env, s);
		if (status != SPILLWAY_STRINGS_OK) {
			out->index = i;
			return status;
		}
		used += (size_t)len;
		out->ends[i] = (jsize)used;
		out->count = i + 1;
	}
	return SPILLWAY_STRINGS_OK;
}

void spillway_free_strings(spillway_strings *s) {
	free(s->chars);
	free(s->ends);
	s->chars = NULL;
	s->ends = NULL;
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
