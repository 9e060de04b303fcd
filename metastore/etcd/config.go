package etcd

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline"
)

// checkClient refuses a client the store cannot work with: one that
// clientv3.New or clientv3.NewCtxClient did not make (its methods would
// panic), or one with an endpoint that the client would only fail to dial,
// far from the mistake, at the first call. A client without endpoints (an
// in-process one, such as etcd's v3client) is fine.
func checkClient(client *clientv3.Client) error {
	if client == nil {
		return &cutline.ConfigError{Field: "client", Reason: "nil"}
	}
	if client.Ctx() == nil {
		return &cutline.ConfigError{Field: "client", Reason: "not made by clientv3.New or clientv3.NewCtxClient"}
	}
	for i, ep := range client.Endpoints() {
		if reason := checkEndpoint(ep); reason != "" {
			return &cutline.ConfigError{
				Field:  fmt.Sprintf("clientv3.Config.Endpoints[%d]", i),
				Value:  fmt.Sprintf("%q", redactEndpoint(ep)),
				Reason: reason,
			}
		}
	}
	return nil
}

// checkEndpoint returns why ep is not an endpoint the etcd client can dial,
// or "": the client takes http://host:port, https://host:port,
// unix://path, unixs://path and a bare host:port. Its answers never quote
// ep, which may hold credentials.
func checkEndpoint(ep string) string {
	if ep == "" {
		return "empty"
	}
	for _, r := range ep {
		if r <= ' ' || r == 0x7f {
			return "contains a space or a control character"
		}
	}
	if strings.HasPrefix(ep, "unix:") || strings.HasPrefix(ep, "unixs:") {
		_, path, _ := strings.Cut(ep, ":")
		if strings.TrimPrefix(path, "//") == "" {
			return "no socket path"
		}
		return ""
	}
	hostport := ep
	if scheme, _, ok := strings.Cut(ep, "://"); ok {
		if scheme != "http" && scheme != "https" {
			return fmt.Sprintf("scheme %q is not http, https, unix or unixs", scheme)
		}
		u, err := url.Parse(ep)
		if err != nil {
			return "not a URL" // url.Parse's error quotes ep
		}
		if u.User != nil {
			return "holds credentials: the client takes them from clientv3.Config (Username, Password), never from an endpoint"
		}
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return "has a path, query or fragment"
		}
		hostport = u.Host
	} else if strings.Contains(ep, "/") {
		return "not a URL (scheme://host:port) nor host:port"
	}
	if strings.Contains(hostport, "@") {
		return "holds credentials: the client takes them from clientv3.Config (Username, Password), never from an endpoint"
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "not host:port (etcd's client port is 2379 by default)"
	}
	if host == "" {
		return "no host"
	}
	if net.ParseIP(host) == nil && !hostname(host) {
		return "host is neither an IP address nor a host name"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "port is not a number from 1 to 65535"
	}
	return ""
}

// hostname reports whether h is made of DNS labels: letters, digits, '-'
// and '_', separated by dots.
func hostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// redactEndpoint cuts the user information (user:password@) out of an
// endpoint, so that it can appear in an error or a log.
func redactEndpoint(ep string) string {
	at := strings.LastIndex(ep, "@")
	if at < 0 {
		return ep
	}
	start := 0
	if i := strings.Index(ep, "://"); i >= 0 && i < at {
		start = i + len("://")
	}
	return ep[:start] + "…@" + ep[at+1:]
}

// redactEndpoints is redactEndpoint over a list, joined for a message.
func redactEndpoints(eps []string) string {
	out := make([]string, len(eps))
	for i, ep := range eps {
		out[i] = redactEndpoint(ep)
	}
	return strings.Join(out, ",")
}
