package stream

// WithoutPanes makes env's sliding windows keep each window's contents
// whole (see Aggregate), as checkpoints taken before panes hold them.
func WithoutPanes(env *Environment) { env.noPanes = true }
