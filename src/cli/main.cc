#include <iostream>
int main(int argc, char** argv) {
  std::cout << "outbox " << OUTBOX_VERSION << "\n";
  return 0;
}
