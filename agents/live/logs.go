package live

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/omega-cell/omega/agents/process"
)

// startLogs starts the agent's log endpoint on cfg.LogsAddr, over its
// tasks' directories, and returns it with the URL to publish (nil and ""
// without one). advertise is the host published for an address of every
// interface. The caller closes the listener.
func startLogs(cfg Config, advertise string, logger *slog.Logger) (*process.LogListener, string, error) {
	if cfg.LogsAddr == "" {
		logger.Info("no log endpoint: omega logs cannot read this machine's tasks")
		return nil, "", nil
	}
	s := &process.LogServer{Dir: filepath.Join(cfg.Data, "tasks")}
	if cfg.LogsTokensFile != "" {
		toks, err := process.LoadLogTokens(cfg.LogsTokensFile)
		if err != nil {
			return nil, "", fmt.Errorf("the log endpoint's tokens: %w", err)
		}
		s.Tokens = toks
	}
	l, err := process.ListenLogs(cfg.LogsAddr, s)
	if err != nil {
		return nil, "", err
	}
	u := l.URL(advertise)
	switch {
	case len(s.Tokens) > 0:
		logger.Info("listening", "logs", u, "tokens", len(s.Tokens))
	case l.Loopback():
		logger.Info("listening", "logs", u, "access", "open (loopback, no tokens file)")
	default:
		logger.Warn("THE TASKS' LOGS ARE OPEN: anyone who reaches this address reads them (no tokens file)", "logs", u)
	}
	return l, u, nil
}
