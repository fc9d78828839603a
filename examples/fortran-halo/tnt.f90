! Fortran bindings, through ISO_C_BINDING, of the part of tnt's C API (tnt/tnt.h) that halo.f90
! uses. Handles are type(c_ptr); buffers are passed as c_loc() of a target; sizes are bytes.
module tnt
  use, intrinsic :: iso_c_binding
  implicit none
  ! tnt_status, tnt_datatype and tnt_op values of tnt/tnt.h
  integer(c_int), parameter :: TNT_SUCCESS = 0
  integer(c_int), parameter :: TNT_FLOAT64 = 1
  integer(c_int), parameter :: TNT_SUM = 0, TNT_MAX = 3

  interface
    integer(c_int) function tnt_init(world) bind(C, name="tnt_init")
      import :: c_int, c_ptr
      type(c_ptr), intent(out) :: world
    end function
    integer(c_int) function tnt_finalize(comm) bind(C, name="tnt_finalize")
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
    end function
    integer(c_int) function tnt_comm_rank(comm, rank) bind(C, name="tnt_comm_rank")
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int), intent(out) :: rank
    end function
    integer(c_int) function tnt_comm_size(comm, size) bind(C, name="tnt_comm_size")
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int), intent(out) :: size
    end function
    integer(c_int) function tnt_isend(comm, data, bytes, peer, tag, request) bind(C, name="tnt_isend")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, data
      integer(c_size_t), value :: bytes
      integer(c_int), value :: peer, tag
      type(c_ptr), intent(out) :: request
    end function
    integer(c_int) function tnt_irecv(comm, data, capacity, peer, tag, request) bind(C, name="tnt_irecv")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, data
      integer(c_size_t), value :: capacity
      integer(c_int), value :: peer, tag
      type(c_ptr), intent(out) :: request
    end function
    integer(c_int) function tnt_waitall(count, requests) bind(C, name="tnt_waitall")
      import :: c_int, c_ptr, c_size_t
      integer(c_size_t), value :: count
      type(c_ptr), intent(in) :: requests(*)
    end function
    integer(c_int) function tnt_request_free(request) bind(C, name="tnt_request_free")
      import :: c_int, c_ptr
      type(c_ptr), value :: request
    end function
    integer(c_int) function tnt_allreduce(comm, data, count, type, op) bind(C, name="tnt_allreduce")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, data
      integer(c_size_t), value :: count
      integer(c_int), value :: type, op
    end function
    type(c_ptr) function tnt_last_error() bind(C, name="tnt_last_error")
      import :: c_ptr
    end function
  end interface

contains

  ! Stops the program with tnt's message when a call failed.
  subroutine tnt_check(status, call)
    integer(c_int), intent(in) :: status
    character(*), intent(in) :: call
    character(kind=c_char), pointer :: text(:)
    integer :: length
    interface
      integer(c_size_t) function strlen(s) bind(C, name="strlen")
        import :: c_ptr, c_size_t
        type(c_ptr), value :: s
      end function
    end interface
    if (status == TNT_SUCCESS) return
    length = int(strlen(tnt_last_error()))
    call c_f_pointer(tnt_last_error(), text, [length])
    write (0, '(a, " failed (status ", i0, "): ", *(a))') call, status, text
    error stop 1
  end subroutine
end module
