! A Fortran code on tnt: a 1-D diffusion stencil over N points cut into one block per rank, whose
! halos move by tnt_isend/tnt_irecv, then the field assembled on every rank by tnt_allreduce.
! Each point's update reads only its neighbours' old values, so the field is bitwise the same
! for any number of ranks.
!   tnt-launch -n 4 -- tnt-fortran-halo N STEPS [DUMP-FILE]
program halo
  use tnt
  implicit none
  type(c_ptr) :: world
  type(c_ptr) :: requests(4)
  integer(c_int) :: rank, size, left, right
  integer :: n, steps, first, count, i, step, pending
  real(c_double), allocatable, target :: u(:), next(:), field(:)
  real(c_double), target :: largest
  character(len=256) :: argument, dump
  integer(c_size_t), parameter :: one = int(c_sizeof(0.0_c_double), c_size_t)

  call tnt_check(tnt_init(world), "tnt_init")
  call tnt_check(tnt_comm_rank(world, rank), "tnt_comm_rank")
  call tnt_check(tnt_comm_size(world, size), "tnt_comm_size")
  if (command_argument_count() < 2) then
    write (0, '(a)') "usage: tnt-fortran-halo N STEPS [DUMP-FILE]"
    error stop 2
  end if
  call get_command_argument(1, argument)
  read (argument, *) n
  call get_command_argument(2, argument)
  read (argument, *) steps
  dump = ""
  if (command_argument_count() >= 3) call get_command_argument(3, dump)
  if (n < size) then
    write (0, '(a, i0, a, i0, a)') "tnt-fortran-halo: ", n, " points cannot be cut among ", size, " ranks"
    error stop 2
  end if

  ! This rank's block: the first mod(n, size) ranks hold one point more.
  count = n / size
  first = rank * count + min(rank, mod(n, size))
  if (rank < mod(n, size)) count = count + 1
  allocate (u(0:count + 1), next(0:count + 1), field(n))
  do i = 1, count
    u(i) = real(mod((first + i) * 37, 101), c_double) / 101.0_c_double
  end do
  u(0) = 0
  u(count + 1) = 0  ! the ends of the domain stay 0
  left = rank - 1
  right = rank + 1

  do step = 1, steps
    pending = 0
    ! Tag 0 travels left, tag 1 right.
    if (left >= 0) then
      call tnt_check(tnt_irecv(world, c_loc(u(0)), one, left, 1_c_int, requests(pending + 1)), "tnt_irecv")
      call tnt_check(tnt_isend(world, c_loc(u(1)), one, left, 0_c_int, requests(pending + 2)), "tnt_isend")
      pending = pending + 2
    end if
    if (right < size) then
      call tnt_check(tnt_irecv(world, c_loc(u(count + 1)), one, right, 0_c_int, requests(pending + 1)), "tnt_irecv")
      call tnt_check(tnt_isend(world, c_loc(u(count)), one, right, 1_c_int, requests(pending + 2)), "tnt_isend")
      pending = pending + 2
    end if
    call tnt_check(tnt_waitall(int(pending, c_size_t), requests), "tnt_waitall")
    do i = 1, pending
      call tnt_check(tnt_request_free(requests(i)), "tnt_request_free")
    end do
    do i = 1, count
      next(i) = 0.5_c_double * u(i) + 0.25_c_double * (u(i - 1) + u(i + 1))
    end do
    u(1:count) = next(1:count)
  end do

  ! Each rank's block in place, zeros elsewhere: the sum is every block, exactly.
  field = 0
  field(first + 1:first + count) = u(1:count)
  call tnt_check(tnt_allreduce(world, c_loc(field), int(n, c_size_t), TNT_FLOAT64, TNT_SUM), "tnt_allreduce")
  largest = maxval(u(1:count))
  call tnt_check(tnt_allreduce(world, c_loc(largest), 1_c_size_t, TNT_FLOAT64, TNT_MAX), "tnt_allreduce")
  if (largest /= maxval(field)) then
    write (0, '(a)') "tnt-fortran-halo: the allreduced maximum is not the field's"
    error stop 1
  end if
  if (rank == 0) then
    write (*, '(a, i0, a, i0, a, i0, a, es24.17, a, es24.17)') "fortran halo: ", n, " points, ", steps, &
      " steps on ", size, " ranks: sum ", sum(field), ", max ", largest
    if (len_trim(dump) > 0) then
      open (unit=10, file=trim(dump), access="stream", form="unformatted", status="replace")
      write (10) field
      close (10)
    end if
  end if
  call tnt_check(tnt_finalize(world), "tnt_finalize")
end program
