package ha

import "go.uber.org/zap"

// quietZap is the etcd client's logger: its own retries are errors only;
// weir logs what they mean through slog.
func quietZap() *zap.Logger {
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	l, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return l
}
