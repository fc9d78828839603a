#include "tnt/actors/actor.h"
#include "tnt/core/error.h"

#include <cxxabi.h>

#include <cstdlib>
#include <stdexcept>

#include "cell.h"

namespace tnt::actors {

namespace detail {
namespace {
// The cell spawn() made for the actor being constructed on this thread.
thread_local std::shared_ptr<Cell> constructing;
}  // namespace

ConstructionScope::ConstructionScope(std::shared_ptr<Cell> cell) {
  if (constructing) throw LogicError("tnt::actors: spawn() inside an actor's constructor");
  constructing = std::move(cell);
}
ConstructionScope::~ConstructionScope() { constructing.reset(); }

std::string type_name(const std::type_info& type) {
  int status = 0;
  char* readable = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && readable ? readable : type.name();
  std::free(readable);
  return out;
}
}  // namespace detail

Actor::Actor() : cell_(detail::constructing) {
  if (!cell_) throw LogicError("tnt::actors: actors are created with ActorSystem::spawn");
}

const std::string& Actor::name() const { return cell_->name; }
const Strand& Actor::strand() const { return *cell_->strand; }

void Actor::check_constructing(const std::type_info& type) const {
  if (detail::constructing != cell_) {
    throw LogicError("actor '" + cell_->name + "': on<" + detail::type_name(type) +
                     ">() is only allowed in its constructor");
  }
}

}  // namespace tnt::actors
