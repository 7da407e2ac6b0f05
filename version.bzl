"""cxv's version: the one place it is written. Each program gets it as CXV_VERSION (a string
literal) through VERSION_DEFINES; the Debian package (tools/package) carries it too."""

CXV_VERSION = "0.1.0"

VERSION_DEFINES = ['CXV_VERSION=\\"%s\\"' % CXV_VERSION]
