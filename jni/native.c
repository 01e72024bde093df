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
	if (spillwayOnLoad(env) != 0) {
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

// same_strings returns 1 if arr's n elements are the objects refs[0..n), 0 if not, -1 with an
// exception pending.
static int same_strings(JNIEnv *env, jobjectArray arr, const jobject *refs, jsize n) {
	// Every JNI call here costs a VM transition. The few local refs of a usual dir list are left
	// for the JVM to free when the native call returns (16 are always available); only a long
	// list deletes them one by one.
	jboolean keep_refs = n <= 12;
	for (jsize i = 0; i < n; i++) {
		jobject s = (*env)->GetObjectArrayElement(env, arr, i);
		if (s == NULL) {
			return (*env)->ExceptionCheck(env) ? -1 : 0;
		}
		jboolean same = (*env)->IsSameObject(env, s, refs[i]);
		if (!keep_refs) {
			(*env)->DeleteLocalRef(env, s);
		}
		if (!same) {
			return 0;
		}
	}
	return 1;
}

int spillway_find_strings(JNIEnv *env, jobjectArray arr, const spillway_string_set *sets, int count) {
	jsize n = (*env)->GetArrayLength(env, arr);
	for (int i = 0; i < count; i++) {
		if (sets[i].n != n) {
			continue;
		}
		int same = same_strings(env, arr, sets[i].refs, n);
		if (same < 0) {
			return -2;
		}
		if (same) {
			return i;
		}
	}
	return -1;
}

int spillway_pin_strings(JNIEnv *env, jobjectArray arr, jobject *refs, jsize n) {
	for (jsize i = 0; i < n; i++) {
		jobject s = (*env)->GetObjectArrayElement(env, arr, i);
		refs[i] = s == NULL ? NULL : (*env)->NewGlobalRef(env, s);
		(*env)->DeleteLocalRef(env, s);
		if (refs[i] == NULL) {
			for (jsize j = 0; j < i; j++) {
				(*env)->DeleteGlobalRef(env, refs[j]);
			}
			return -1;
		}
	}
	return 0;
}

int spillway_buffer(JNIEnv *env, jobject buf, jint *limit, void **addr) {
	*limit = (*env)->CallIntMethod(env, buf, buffer_limit);
	if ((*env)->ExceptionCheck(env)) {
		return -1;
	}
	*addr = (*env)->GetDirectBufferAddress(env, buf);
	return 0;
}

int spillway_copy_heap_buffer(JNIEnv *env, jobject buf, jint offset, jint length, void *dst) {
	jboolean has_array = (*env)->CallBooleanMethod(env, buf, buffer_has_array);
	if ((*env)->ExceptionCheck(env)) {
		return -1;
	}
	if (has_array) {
		jint base = (*env)->CallIntMethod(env, buf, buffer_array_offset);
		if ((*env)->ExceptionCheck(env)) {
			return -1;
		}
		jbyteArray array = (jbyteArray)(*env)->CallObjectMethod(env, buf, buffer_array);
		if ((*env)->ExceptionCheck(env)) {
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

jstring spillway_new_string(JNIEnv *env, const jchar *chars, jsize len) {
	return (*env)->NewString(env, chars, len);
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
