#!/usr/bin/env bash
set -u
bench/same_call_lease.sh .carry/kiln-0.1.0-x86_64.tar.gz $OUT/same 2>&1 | tail -60
