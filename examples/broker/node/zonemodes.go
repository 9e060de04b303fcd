package node

import (
	"fmt"
	"os"
	"strconv"

	"github.com/cutline/cutline/objstore/fs"
)

// The permissions of the filesystem zones' objects and directories by
// default: the owner's only, since the records are the producers' data.
const (
	defaultZoneFileMode os.FileMode = 0o600
	defaultZoneDirMode  os.FileMode = 0o700
)

// modeFlag is a flag of a permission, in octal.
type modeFlag struct{ m *os.FileMode }

func (f modeFlag) String() string {
	if f.m == nil {
		return ""
	}
	return fmt.Sprintf("%04o", uint32(*f.m))
}

func (f modeFlag) Set(v string) error {
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o777 {
		return fmt.Errorf("a permission in octal, 0000 to 0777")
	}
	*f.m = os.FileMode(n)
	return nil
}

// checkZoneModes refuses permissions that keep the broker itself out of
// its zones.
func (c *Settings) checkZoneModes() error {
	switch {
	case c.zoneFileMode&0o600 != 0o600:
		return Refuse("zone-file-mode", modeFlag{&c.zoneFileMode}, "read and write for the owner at least (0600)")
	case c.zoneDirMode&0o700 != 0o700:
		return Refuse("zone-dir-mode", modeFlag{&c.zoneDirMode}, "read, write and search for the owner at least (0700)")
	}
	return nil
}

// zoneOptions are the fs options of the filesystem zone name, with the
// permissions the flags give (before the umask).
func (c *Settings) zoneOptions(name string) fs.Options {
	return fs.Options{Name: name, CreateRoot: true, FileMode: c.zoneFileMode, DirMode: c.zoneDirMode}
}
