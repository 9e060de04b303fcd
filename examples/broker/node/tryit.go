package node

import (
	"net"
	"strings"
)

// logCommands logs, once the API listens at addr, the commands a user of
// this machine pastes to produce, consume, read the metrics and inspect
// the metastore: with the real paths of the run's certificate and token,
// never the token itself. They hold no double quote, which a text log
// line would escape: the token goes to curl's --oauth2-bearer.
func (p *process) logCommands(addr net.Addr) {
	if p.cfg.Role != RoleAll {
		return
	}
	curl := "curl -s"
	if p.sec.caFile != "" {
		curl += " --cacert " + shellQuote(p.sec.caFile)
	}
	if p.sec.tokenFile != "" {
		curl += " --oauth2-bearer $(cat " + shellQuote(p.sec.tokenFile) + ")"
	}
	base := apiURL(addr.String())
	if p.sec.APITLS() == nil {
		base = "http" + strings.TrimPrefix(base, "https")
	}
	p.log.Info("paste to produce", "cmd", curl+" --data-binary hello "+base+"/v1/streams/orders/records")
	p.log.Info("paste to consume", "cmd", curl+" "+shellQuote(base+"/v1/streams/orders/records?offset=0&limit=10"))
	if p.cfg.metricsListen == "" {
		p.log.Info("paste to read the metrics", "cmd", curl+" "+base+"/metrics")
	}
	if p.be.local != nil {
		p.log.Info("paste to inspect the metastore", "cmd",
			"cutline -etcd "+p.be.local.Endpoint+" -etcd-root "+shellQuote(p.cfg.EtcdRoot)+" chain "+p.cfg.node)
	}
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and /._-+:,=@%.
func shellQuote(s string) string {
	safe := s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("/._-+:,=@%", r))
	})
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
