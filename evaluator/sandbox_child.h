// The sandbox child's main loop (`kiln __sandbox --backend B --gpu N --arena-fd FD --arena-bytes
// BYTES`): opens the device, maps the arena, and answers JSON requests on stdin, one per line,
// until "exit" or end of input. The request vocabulary is documented in sandbox_child.cc.
#pragma once

namespace kiln::eval {

int sandbox_child_main(int argc, char** argv);

}  // namespace kiln::eval
