package cli

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/shoaldb/shoal/client"
)

// ClientConfig is the client configuration the root's flags give (--host, --auth-token, --certs-dir,
// --timeout), for a command to dial with client.New. FailFast: a wrong or stopped --host is reported
// at once instead of after the retries.
func ClientConfig() (client.Config, error) {
	var addrs []string
	for _, a := range strings.Split(Global.Host, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return client.Config{}, Usage(errors.New("--host is empty"))
	}
	var tlsCfg *tls.Config
	if Global.CertsDir != "" {
		var err error
		if tlsCfg, err = client.LoadTLS(Global.CertsDir); err != nil {
			return client.Config{}, fmt.Errorf("--certs-dir: %w", err)
		}
	}
	return client.Config{Addrs: addrs, AuthToken: Global.AuthToken, TLS: tlsCfg,
		RequestTimeout: min(client.DefaultRequestTimeout, Global.Timeout), FailFast: true}, nil
}
