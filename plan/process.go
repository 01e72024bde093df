package plan

// process is the registry of the whole process. Both bindings of libspillway.so (the JNI entry
// points and the C ABI) use it, so that a plan made through either shares the executor-wide
// budget, the configured file format and the handle numbers with the other's.
var process = NewRegistry(nil)

// ProcessRegistry returns the registry of the whole process.
func ProcessRegistry() *Registry { return process }
