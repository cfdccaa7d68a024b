package membership

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/memberlist"
)

// Profiles are the memberlist profiles a member may run with: memberlist's
// own defaults for a LAN (the cell's default: failure detection in a few
// seconds), a WAN (slower, more tolerant), and one host (loopback:
// faster). Every member of a cell should run the same.
var Profiles = []string{"lan", "wan", "local"}

// ProfileHelp says what each profile is, for a flag's help.
const ProfileHelp = "memberlist's defaults to run with: lan (failure detection in a few seconds), wan (slower, more tolerant) or local (one host)"

// Profile is memberlist's default configuration for a profile ("" is
// "lan"): a new one on every call, the caller's to change.
func Profile(name string) (*memberlist.Config, error) {
	switch name {
	case "", "lan":
		return memberlist.DefaultLANConfig(), nil
	case "wan":
		return memberlist.DefaultWANConfig(), nil
	case "local":
		return memberlist.DefaultLocalConfig(), nil
	}
	return nil, fmt.Errorf("gossip profile %s: want lan, wan or local", quote(name))
}

// KeyHelp says what a key file is, for a flag's help.
const KeyHelp = "a file holding the cell's gossip key in base64 (16, 24 or 32 bytes; openssl rand -base64 32): the membership is encrypted and only members with the key join it (every member needs the same)"

// ReadKey reads a gossip key file: the key in base64 (16, 24 or 32 bytes:
// AES-128, -192 or -256), as `openssl rand -base64 32` writes one. Every
// member of the cell needs the same key; a member without it, or with
// another, is not let in, and its messages are not read. The errors name
// the file and what is wrong with it (never its content).
func ReadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("gossip key %s: not base64: %w", path, err)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("gossip key %s: %d bytes: want 16, 24 or 32 (openssl rand -base64 32)", path, len(key))
}
