// The C++ toolchain: libstdc++'s headers and library, C++17.
#include <algorithm>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

int main()
{
	std::vector<int> v(10);
	std::iota(v.begin(), v.end(), 1);
	std::string s = "toolchain";
	std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
	std::map<std::string, int> m{{"sum", std::accumulate(v.begin(), v.end(), 0)}};
	std::cout << "c++: sum=" << m["sum"] << " upper=" << s << '\n';
	return 0;
}
